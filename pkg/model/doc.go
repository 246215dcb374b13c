// Package model talks to the Anthropic Messages API: a streaming client
// built on the official Go SDK that reports content blocks the moment they
// complete, retries overloaded and failed requests with backoff and jitter,
// and places prompt-cache breakpoints on the system prompt, the last tool and
// the newest message.
//
// It also defines the conversation's data (Message, Block) in the API's own
// JSON form, so transcripts can be stored and sent back unchanged.
//
// It knows nothing of tools being run, sessions or gRPC: the conversation
// loop lives in pkg/orchestrator. The scripted fake of the API used in tests
// is in the fakeapi subpackage.
//
// Why one package of this size (about 1,100 lines): the conversation's
// data and the streaming client that sends and accumulates it are the
// API's two sides of one format.
package model
