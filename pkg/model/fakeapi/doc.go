// Package fakeapi is a scripted fake of the Anthropic Messages API for tests
// anywhere in the repository.
//
// A Server is a real HTTP server on 127.0.0.1 that answers each streaming
// POST /v1/messages with the next scripted Reply, sent as server-sent events
// in the API's own format (message_start, content_block_start/delta/stop with
// text, thinking and input_json deltas, message_delta, message_stop). Server
// tools' blocks can be scripted too: server_tool_use, streamed like
// tool_use, and whole blocks such as web_search_tool_result. Replies
// can pause or wait before a block, cut the connection in the middle of a
// message, send an error event, or answer with an HTTP error such as 429 or
// 529 and the JSON body the SDK expects. A Responder may choose its reply by
// looking at the request, so a test can check the tool results it was sent
// before answering. Every request is recorded, decoded, for assertions.
//
// Point the SDK at Server.URL (option.WithBaseURL, or ANTHROPIC_BASE_URL for
// a child process). Accepted connections have TCP_NODELAY set so that
// latency measurements are not distorted by Nagle's algorithm.
//
// Why one package of this size (about 650 lines): it serves the Messages
// API's streaming events faithfully enough for the official SDK, and the
// script format and the server that plays it change together.
package fakeapi
