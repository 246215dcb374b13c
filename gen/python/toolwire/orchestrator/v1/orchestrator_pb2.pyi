from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from toolwire.executor.v1 import executor_pb2 as _executor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
STOP_REASON_END_TURN: StopReason
STOP_REASON_ERROR: StopReason
STOP_REASON_INTERRUPTED: StopReason
STOP_REASON_MAX_TURNS: StopReason
STOP_REASON_REFUSAL: StopReason
STOP_REASON_STOP_SEQUENCE: StopReason
STOP_REASON_UNSPECIFIED: StopReason

class Attach(_message.Message):
    __slots__ = ["last_sequence", "session_id"]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    last_sequence: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., last_sequence: _Optional[int] = ...) -> None: ...

class Attached(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ConverseRequest(_message.Message):
    __slots__ = ["attach", "background", "interrupt", "permission_decision", "user_message"]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DECISION_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    attach: Attach
    background: _executor_pb2.Background
    interrupt: Interrupt
    permission_decision: _executor_pb2.PermissionDecision
    user_message: UserMessage
    def __init__(self, attach: _Optional[_Union[Attach, _Mapping]] = ..., user_message: _Optional[_Union[UserMessage, _Mapping]] = ..., permission_decision: _Optional[_Union[_executor_pb2.PermissionDecision, _Mapping]] = ..., interrupt: _Optional[_Union[Interrupt, _Mapping]] = ..., background: _Optional[_Union[_executor_pb2.Background, _Mapping]] = ...) -> None: ...

class ConverseResponse(_message.Message):
    __slots__ = ["attached", "background_ack", "error", "mcp_tools_changed", "parent_tool_use_id", "permission_request", "retry", "sequence", "text_delta", "tool_progress", "tool_result", "tool_use", "turn_complete"]
    ATTACHED_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_ACK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MCP_TOOLS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    PARENT_TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_REQUEST_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    TURN_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    attached: Attached
    background_ack: _executor_pb2.BackgroundAck
    error: Error
    mcp_tools_changed: _executor_pb2.McpToolsChanged
    parent_tool_use_id: str
    permission_request: _executor_pb2.PermissionRequest
    retry: Retry
    sequence: int
    text_delta: TextDelta
    tool_progress: _executor_pb2.Progress
    tool_result: _executor_pb2.Result
    tool_use: ToolUseAnnounced
    turn_complete: TurnComplete
    def __init__(self, sequence: _Optional[int] = ..., attached: _Optional[_Union[Attached, _Mapping]] = ..., text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., tool_use: _Optional[_Union[ToolUseAnnounced, _Mapping]] = ..., tool_progress: _Optional[_Union[_executor_pb2.Progress, _Mapping]] = ..., tool_result: _Optional[_Union[_executor_pb2.Result, _Mapping]] = ..., permission_request: _Optional[_Union[_executor_pb2.PermissionRequest, _Mapping]] = ..., turn_complete: _Optional[_Union[TurnComplete, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., retry: _Optional[_Union[Retry, _Mapping]] = ..., mcp_tools_changed: _Optional[_Union[_executor_pb2.McpToolsChanged, _Mapping]] = ..., background_ack: _Optional[_Union[_executor_pb2.BackgroundAck, _Mapping]] = ..., parent_tool_use_id: _Optional[str] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["config", "session_id"]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    config: SessionConfig
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., config: _Optional[_Union[SessionConfig, _Mapping]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Error(_message.Message):
    __slots__ = ["kind", "message", "reason", "recoverable"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RECOVERABLE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    message: str
    reason: str
    recoverable: bool
    def __init__(self, kind: _Optional[str] = ..., message: _Optional[str] = ..., recoverable: bool = ..., reason: _Optional[str] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class Interrupt(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["sessions"]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ...) -> None: ...

class Retry(_message.Message):
    __slots__ = ["attempt", "delay", "max_attempts", "reason"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    delay: _duration_pb2.Duration
    max_attempts: int
    reason: str
    def __init__(self, attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class RewindRequest(_message.Message):
    __slots__ = ["session_id", "tool_use_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    tool_use_id: str
    def __init__(self, session_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ...) -> None: ...

class RewindResponse(_message.Message):
    __slots__ = ["messages_removed", "restore", "session"]
    MESSAGES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    RESTORE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    messages_removed: int
    restore: _executor_pb2.RestoreResult
    session: Session
    def __init__(self, restore: _Optional[_Union[_executor_pb2.RestoreResult, _Mapping]] = ..., messages_removed: _Optional[int] = ..., session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["busy", "created_at", "executor", "id", "mcp_servers", "message_count", "model", "sandbox", "turns", "usage"]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    busy: bool
    created_at: _timestamp_pb2.Timestamp
    executor: str
    id: str
    mcp_servers: _containers.RepeatedCompositeFieldContainer[_executor_pb2.McpServerStatus]
    message_count: int
    model: str
    sandbox: _executor_pb2.SandboxInfo
    turns: int
    usage: Usage
    def __init__(self, id: _Optional[str] = ..., executor: _Optional[str] = ..., model: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., turns: _Optional[int] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., message_count: _Optional[int] = ..., busy: bool = ..., sandbox: _Optional[_Union[_executor_pb2.SandboxInfo, _Mapping]] = ..., mcp_servers: _Optional[_Iterable[_Union[_executor_pb2.McpServerStatus, _Mapping]]] = ...) -> None: ...

class SessionConfig(_message.Message):
    __slots__ = ["allowed_tools", "disallowed_tools", "executor", "max_tokens", "max_turns", "mcp_servers", "model", "options", "require_sandbox", "settings", "system_prompt", "thinking_budget_tokens", "workspace"]
    class McpServersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _executor_pb2.McpServerConfig
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_executor_pb2.McpServerConfig, _Mapping]] = ...) -> None: ...
    ALLOWED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    DISALLOWED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_SANDBOX_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    THINKING_BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    allowed_tools: _containers.RepeatedScalarFieldContainer[str]
    disallowed_tools: _containers.RepeatedScalarFieldContainer[str]
    executor: str
    max_tokens: int
    max_turns: int
    mcp_servers: _containers.MessageMap[str, _executor_pb2.McpServerConfig]
    model: str
    options: _executor_pb2.SessionOptions
    require_sandbox: _containers.RepeatedScalarFieldContainer[str]
    settings: _executor_pb2.Settings
    system_prompt: str
    thinking_budget_tokens: int
    workspace: str
    def __init__(self, executor: _Optional[str] = ..., model: _Optional[str] = ..., system_prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ..., max_turns: _Optional[int] = ..., allowed_tools: _Optional[_Iterable[str]] = ..., disallowed_tools: _Optional[_Iterable[str]] = ..., settings: _Optional[_Union[_executor_pb2.Settings, _Mapping]] = ..., workspace: _Optional[str] = ..., thinking_budget_tokens: _Optional[int] = ..., options: _Optional[_Union[_executor_pb2.SessionOptions, _Mapping]] = ..., mcp_servers: _Optional[_Mapping[str, _executor_pb2.McpServerConfig]] = ..., require_sandbox: _Optional[_Iterable[str]] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ["message_id", "text"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    text: str
    def __init__(self, message_id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class ToolUseAnnounced(_message.Message):
    __slots__ = ["id", "input_json", "message_id", "name"]
    ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    input_json: str
    message_id: str
    name: str
    def __init__(self, message_id: _Optional[str] = ..., id: _Optional[str] = ..., name: _Optional[str] = ..., input_json: _Optional[str] = ...) -> None: ...

class TurnComplete(_message.Message):
    __slots__ = ["duration", "requests", "stop_reason", "text", "usage"]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    requests: int
    stop_reason: StopReason
    text: str
    usage: Usage
    def __init__(self, stop_reason: _Optional[_Union[StopReason, str]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., requests: _Optional[int] = ..., text: _Optional[str] = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["cache_creation_input_tokens", "cache_read_input_tokens", "input_tokens", "output_tokens"]
    CACHE_CREATION_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    input_tokens: int
    output_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ..., cache_creation_input_tokens: _Optional[int] = ...) -> None: ...

class UserMessage(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class StopReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
