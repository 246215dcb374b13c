from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

ABORT_REASON_SHUTDOWN: AbortReason
ABORT_REASON_SIBLING_ERROR: AbortReason
ABORT_REASON_STREAMING_FALLBACK: AbortReason
ABORT_REASON_TIMEOUT: AbortReason
ABORT_REASON_UNSPECIFIED: AbortReason
ABORT_REASON_USER_INTERRUPTED: AbortReason
CONCURRENCY_ALWAYS: Concurrency
CONCURRENCY_DEPENDS_ON_INPUT: Concurrency
CONCURRENCY_NEVER: Concurrency
CONCURRENCY_UNSPECIFIED: Concurrency
DESCRIPTOR: _descriptor.FileDescriptor
HOOK_EVENT_POST_TOOL_USE: HookEvent
HOOK_EVENT_PRE_TOOL_USE: HookEvent
HOOK_EVENT_UNSPECIFIED: HookEvent
LIFECYCLE_EVERY_CALL: Lifecycle
LIFECYCLE_FOLDED: Lifecycle
LIFECYCLE_UNSPECIFIED: Lifecycle
MCP_SERVER_STATE_CONNECTED: McpServerState
MCP_SERVER_STATE_DISCONNECTED: McpServerState
MCP_SERVER_STATE_FAILED: McpServerState
MCP_SERVER_STATE_UNSPECIFIED: McpServerState
OUTCOME_DENIED: Outcome
OUTCOME_INTERNAL_ERROR: Outcome
OUTCOME_INTERRUPTED: Outcome
OUTCOME_INVALID_INPUT: Outcome
OUTCOME_SANDBOX_DENIED: Outcome
OUTCOME_SIBLING_ERROR: Outcome
OUTCOME_SUCCESS: Outcome
OUTCOME_TIMEOUT: Outcome
OUTCOME_TOOL_ERROR: Outcome
OUTCOME_UNKNOWN_TOOL: Outcome
OUTCOME_UNSPECIFIED: Outcome
PERMISSION_BEHAVIOR_ALLOW_ALWAYS: PermissionBehavior
PERMISSION_BEHAVIOR_ALLOW_ONCE: PermissionBehavior
PERMISSION_BEHAVIOR_DENY: PermissionBehavior
PERMISSION_BEHAVIOR_UNSPECIFIED: PermissionBehavior
PERMISSION_MODE_ACCEPT_EDITS: PermissionMode
PERMISSION_MODE_BYPASS_PERMISSIONS: PermissionMode
PERMISSION_MODE_DEFAULT: PermissionMode
PERMISSION_MODE_PLAN: PermissionMode
PERMISSION_MODE_UNSPECIFIED: PermissionMode
PROTECTION_CLEAN_ENVIRONMENT: Protection
PROTECTION_EGRESS_ALLOWLIST: Protection
PROTECTION_FILE_ROOTS: Protection
PROTECTION_LANDLOCK_FS: Protection
PROTECTION_LANDLOCK_SCOPE: Protection
PROTECTION_NETWORK_ISOLATION: Protection
PROTECTION_NO_NEW_PRIVS: Protection
PROTECTION_PID_ISOLATION: Protection
PROTECTION_PROCESS_GROUP: Protection
PROTECTION_PROCESS_TREE: Protection
PROTECTION_RESOURCE_LIMITS: Protection
PROTECTION_UNPRIVILEGED_USER: Protection
PROTECTION_UNSPECIFIED: Protection
PROTECTION_WORKSPACE_QUOTA: Protection
RESTORE_ACTION_FAILED: RestoreAction
RESTORE_ACTION_REMOVED: RestoreAction
RESTORE_ACTION_RESTORED: RestoreAction
RESTORE_ACTION_UNSPECIFIED: RestoreAction
RESULT_ORDER_COMPLETION: ResultOrder
RESULT_ORDER_TOOL_USE: ResultOrder
RESULT_ORDER_UNSPECIFIED: ResultOrder
SIBLING_ABORT_DISABLED: SiblingAbort
SIBLING_ABORT_ENABLED: SiblingAbort
SIBLING_ABORT_UNSPECIFIED: SiblingAbort

class Abort(_message.Message):
    __slots__ = ["all", "assistant_message_id", "detail", "reason", "tool_use_id"]
    ALL_FIELD_NUMBER: _ClassVar[int]
    ASSISTANT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    all: bool
    assistant_message_id: str
    detail: str
    reason: AbortReason
    tool_use_id: str
    def __init__(self, tool_use_id: _Optional[str] = ..., assistant_message_id: _Optional[str] = ..., all: bool = ..., reason: _Optional[_Union[AbortReason, str]] = ..., detail: _Optional[str] = ...) -> None: ...

class AbortAck(_message.Message):
    __slots__ = ["abort", "tool_use_ids"]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_IDS_FIELD_NUMBER: _ClassVar[int]
    abort: Abort
    tool_use_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, abort: _Optional[_Union[Abort, _Mapping]] = ..., tool_use_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Accepted(_message.Message):
    __slots__ = ["concurrency_safe", "duplicate", "tool_use_id"]
    CONCURRENCY_SAFE_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    concurrency_safe: bool
    duplicate: bool
    tool_use_id: str
    def __init__(self, tool_use_id: _Optional[str] = ..., concurrency_safe: bool = ..., duplicate: bool = ...) -> None: ...

class Background(_message.Message):
    __slots__ = ["tool_use_id"]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    tool_use_id: str
    def __init__(self, tool_use_id: _Optional[str] = ...) -> None: ...

class BackgroundAck(_message.Message):
    __slots__ = ["moved", "reason", "tool_use_id"]
    MOVED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    moved: bool
    reason: str
    tool_use_id: str
    def __init__(self, tool_use_id: _Optional[str] = ..., moved: bool = ..., reason: _Optional[str] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ["files", "time", "tool_name", "tool_use_id"]
    FILES_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[CheckpointFile]
    time: _timestamp_pb2.Timestamp
    tool_name: str
    tool_use_id: str
    def __init__(self, tool_use_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., files: _Optional[_Iterable[_Union[CheckpointFile, _Mapping]]] = ...) -> None: ...

class CheckpointFile(_message.Message):
    __slots__ = ["existed", "mode", "path", "size"]
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    existed: bool
    mode: int
    path: str
    size: int
    def __init__(self, path: _Optional[str] = ..., existed: bool = ..., mode: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class CheckpointList(_message.Message):
    __slots__ = ["bytes", "checkpoints", "dropped_tool_use_ids", "max_bytes", "request_id"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_TOOL_USE_IDS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    checkpoints: _containers.RepeatedCompositeFieldContainer[Checkpoint]
    dropped_tool_use_ids: _containers.RepeatedScalarFieldContainer[str]
    max_bytes: int
    request_id: str
    def __init__(self, request_id: _Optional[str] = ..., checkpoints: _Optional[_Iterable[_Union[Checkpoint, _Mapping]]] = ..., dropped_tool_use_ids: _Optional[_Iterable[str]] = ..., bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class ContentBlock(_message.Message):
    __slots__ = ["document", "image", "text"]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    document: DocumentBlock
    image: ImageBlock
    text: TextBlock
    def __init__(self, text: _Optional[_Union[TextBlock, _Mapping]] = ..., image: _Optional[_Union[ImageBlock, _Mapping]] = ..., document: _Optional[_Union[DocumentBlock, _Mapping]] = ...) -> None: ...

class DocumentBlock(_message.Message):
    __slots__ = ["data_base64", "media_type"]
    DATA_BASE64_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    data_base64: str
    media_type: str
    def __init__(self, media_type: _Optional[str] = ..., data_base64: _Optional[str] = ...) -> None: ...

class DomainList(_message.Message):
    __slots__ = ["domains"]
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    domains: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, domains: _Optional[_Iterable[str]] = ...) -> None: ...

class ExecuteRequest(_message.Message):
    __slots__ = ["abort", "background", "list_checkpoints", "open", "permission_decision", "restore_checkpoint", "resume", "tool_use"]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    LIST_CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_DECISION_FIELD_NUMBER: _ClassVar[int]
    RESTORE_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    abort: Abort
    background: Background
    list_checkpoints: ListCheckpoints
    open: Open
    permission_decision: PermissionDecision
    restore_checkpoint: RestoreCheckpoint
    resume: Resume
    tool_use: ToolUse
    def __init__(self, open: _Optional[_Union[Open, _Mapping]] = ..., resume: _Optional[_Union[Resume, _Mapping]] = ..., tool_use: _Optional[_Union[ToolUse, _Mapping]] = ..., abort: _Optional[_Union[Abort, _Mapping]] = ..., permission_decision: _Optional[_Union[PermissionDecision, _Mapping]] = ..., background: _Optional[_Union[Background, _Mapping]] = ..., list_checkpoints: _Optional[_Union[ListCheckpoints, _Mapping]] = ..., restore_checkpoint: _Optional[_Union[RestoreCheckpoint, _Mapping]] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ["abort_ack", "accepted", "background_ack", "checkpoint_list", "hello", "mcp_tools_changed", "permission_request", "progress", "restore_result", "result", "sequence", "started", "task_notification", "time"]
    ABORT_ACK_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_ACK_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_LIST_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    MCP_TOOLS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_REQUEST_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESTORE_RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    TASK_NOTIFICATION_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    abort_ack: AbortAck
    accepted: Accepted
    background_ack: BackgroundAck
    checkpoint_list: CheckpointList
    hello: Hello
    mcp_tools_changed: McpToolsChanged
    permission_request: PermissionRequest
    progress: Progress
    restore_result: RestoreResult
    result: Result
    sequence: int
    started: Started
    task_notification: TaskNotification
    time: _timestamp_pb2.Timestamp
    def __init__(self, sequence: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., hello: _Optional[_Union[Hello, _Mapping]] = ..., accepted: _Optional[_Union[Accepted, _Mapping]] = ..., started: _Optional[_Union[Started, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., permission_request: _Optional[_Union[PermissionRequest, _Mapping]] = ..., result: _Optional[_Union[Result, _Mapping]] = ..., abort_ack: _Optional[_Union[AbortAck, _Mapping]] = ..., task_notification: _Optional[_Union[TaskNotification, _Mapping]] = ..., mcp_tools_changed: _Optional[_Union[McpToolsChanged, _Mapping]] = ..., background_ack: _Optional[_Union[BackgroundAck, _Mapping]] = ..., checkpoint_list: _Optional[_Union[CheckpointList, _Mapping]] = ..., restore_result: _Optional[_Union[RestoreResult, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ["executor_version", "last_sequence", "limits", "max_concurrency", "mcp_servers", "mcp_tools", "resume_retention", "resumed", "sandbox", "session_id", "tools", "workspace"]
    EXECUTOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    MCP_TOOLS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    RESUME_RETENTION_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    executor_version: str
    last_sequence: int
    limits: Limits
    max_concurrency: int
    mcp_servers: _containers.RepeatedCompositeFieldContainer[McpServerStatus]
    mcp_tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    resume_retention: _duration_pb2.Duration
    resumed: bool
    sandbox: SandboxInfo
    session_id: str
    tools: _containers.RepeatedScalarFieldContainer[str]
    workspace: str
    def __init__(self, session_id: _Optional[str] = ..., executor_version: _Optional[str] = ..., sandbox: _Optional[_Union[SandboxInfo, _Mapping]] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., max_concurrency: _Optional[int] = ..., resume_retention: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., resumed: bool = ..., last_sequence: _Optional[int] = ..., workspace: _Optional[str] = ..., mcp_servers: _Optional[_Iterable[_Union[McpServerStatus, _Mapping]]] = ..., mcp_tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ..., tools: _Optional[_Iterable[str]] = ...) -> None: ...

class Hook(_message.Message):
    __slots__ = ["commands", "event", "matcher"]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    MATCHER_FIELD_NUMBER: _ClassVar[int]
    commands: _containers.RepeatedCompositeFieldContainer[HookCommand]
    event: HookEvent
    matcher: str
    def __init__(self, event: _Optional[_Union[HookEvent, str]] = ..., matcher: _Optional[str] = ..., commands: _Optional[_Iterable[_Union[HookCommand, _Mapping]]] = ...) -> None: ...

class HookCommand(_message.Message):
    __slots__ = ["command", "timeout"]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    command: str
    timeout: _duration_pb2.Duration
    def __init__(self, command: _Optional[str] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ImageBlock(_message.Message):
    __slots__ = ["data_base64", "media_type"]
    DATA_BASE64_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    data_base64: str
    media_type: str
    def __init__(self, media_type: _Optional[str] = ..., data_base64: _Optional[str] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ["default_timeout", "max_output_chars", "max_output_memory_bytes", "max_read_bytes", "max_timeout"]
    DEFAULT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_CHARS_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    default_timeout: _duration_pb2.Duration
    max_output_chars: int
    max_output_memory_bytes: int
    max_read_bytes: int
    max_timeout: _duration_pb2.Duration
    def __init__(self, default_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., max_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., max_output_chars: _Optional[int] = ..., max_read_bytes: _Optional[int] = ..., max_output_memory_bytes: _Optional[int] = ...) -> None: ...

class ListCheckpoints(_message.Message):
    __slots__ = ["request_id"]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    def __init__(self, request_id: _Optional[str] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ["tools"]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    def __init__(self, tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ...) -> None: ...

class McpServerConfig(_message.Message):
    __slots__ = ["args", "command", "env", "headers", "type", "url"]
    class EnvEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    command: str
    env: _containers.ScalarMap[str, str]
    headers: _containers.ScalarMap[str, str]
    type: str
    url: str
    def __init__(self, type: _Optional[str] = ..., command: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class McpServerStatus(_message.Message):
    __slots__ = ["error", "name", "operator", "server_name", "server_version", "state", "tools", "transport"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    error: str
    name: str
    operator: bool
    server_name: str
    server_version: str
    state: McpServerState
    tools: int
    transport: str
    def __init__(self, name: _Optional[str] = ..., transport: _Optional[str] = ..., operator: bool = ..., state: _Optional[_Union[McpServerState, str]] = ..., error: _Optional[str] = ..., server_name: _Optional[str] = ..., server_version: _Optional[str] = ..., tools: _Optional[int] = ...) -> None: ...

class McpToolsChanged(_message.Message):
    __slots__ = ["servers", "tools"]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[McpServerStatus]
    tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    def __init__(self, servers: _Optional[_Iterable[_Union[McpServerStatus, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ...) -> None: ...

class NetworkSettings(_message.Message):
    __slots__ = ["allowed_domains", "denied_domains"]
    ALLOWED_DOMAINS_FIELD_NUMBER: _ClassVar[int]
    DENIED_DOMAINS_FIELD_NUMBER: _ClassVar[int]
    allowed_domains: DomainList
    denied_domains: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, allowed_domains: _Optional[_Union[DomainList, _Mapping]] = ..., denied_domains: _Optional[_Iterable[str]] = ...) -> None: ...

class Open(_message.Message):
    __slots__ = ["client_name", "client_version", "mcp_servers", "options", "session_id", "settings", "tools", "workspace"]
    class McpServersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: McpServerConfig
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[McpServerConfig, _Mapping]] = ...) -> None: ...
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    client_name: str
    client_version: str
    mcp_servers: _containers.MessageMap[str, McpServerConfig]
    options: SessionOptions
    session_id: str
    settings: Settings
    tools: ToolSet
    workspace: str
    def __init__(self, session_id: _Optional[str] = ..., workspace: _Optional[str] = ..., options: _Optional[_Union[SessionOptions, _Mapping]] = ..., settings: _Optional[_Union[Settings, _Mapping]] = ..., client_name: _Optional[str] = ..., client_version: _Optional[str] = ..., mcp_servers: _Optional[_Mapping[str, McpServerConfig]] = ..., tools: _Optional[_Union[ToolSet, _Mapping]] = ...) -> None: ...

class PermissionDecision(_message.Message):
    __slots__ = ["behavior", "message", "tool_use_id"]
    BEHAVIOR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    behavior: PermissionBehavior
    message: str
    tool_use_id: str
    def __init__(self, tool_use_id: _Optional[str] = ..., behavior: _Optional[_Union[PermissionBehavior, str]] = ..., message: _Optional[str] = ...) -> None: ...

class PermissionRequest(_message.Message):
    __slots__ = ["input_json", "reason", "suggested_rule", "tool_name", "tool_use_id"]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SUGGESTED_RULE_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    input_json: str
    reason: str
    suggested_rule: str
    tool_name: str
    tool_use_id: str
    def __init__(self, tool_use_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., input_json: _Optional[str] = ..., reason: _Optional[str] = ..., suggested_rule: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ["dropped_bytes", "elapsed", "output", "tool_use_id", "total_bytes", "total_lines"]
    DROPPED_BYTES_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_FIELD_NUMBER: _ClassVar[int]
    dropped_bytes: int
    elapsed: _duration_pb2.Duration
    output: bytes
    tool_use_id: str
    total_bytes: int
    total_lines: int
    def __init__(self, tool_use_id: _Optional[str] = ..., output: _Optional[bytes] = ..., elapsed: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., total_lines: _Optional[int] = ..., total_bytes: _Optional[int] = ..., dropped_bytes: _Optional[int] = ...) -> None: ...

class RestoreCheckpoint(_message.Message):
    __slots__ = ["request_id", "tool_use_id"]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    tool_use_id: str
    def __init__(self, request_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ...) -> None: ...

class RestoreResult(_message.Message):
    __slots__ = ["error", "files", "request_id", "tool_use_id"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    error: str
    files: _containers.RepeatedCompositeFieldContainer[RestoredFile]
    request_id: str
    tool_use_id: str
    def __init__(self, request_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., files: _Optional[_Iterable[_Union[RestoredFile, _Mapping]]] = ..., error: _Optional[str] = ...) -> None: ...

class RestoredFile(_message.Message):
    __slots__ = ["action", "error", "path"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    action: RestoreAction
    error: str
    path: str
    def __init__(self, path: _Optional[str] = ..., action: _Optional[_Union[RestoreAction, str]] = ..., error: _Optional[str] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ["content", "decided_by", "exit_code", "is_error", "outcome", "structured_json", "timing", "tool_name", "tool_use_id", "truncation"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    TRUNCATION_FIELD_NUMBER: _ClassVar[int]
    content: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    decided_by: str
    exit_code: int
    is_error: bool
    outcome: Outcome
    structured_json: str
    timing: Timing
    tool_name: str
    tool_use_id: str
    truncation: Truncation
    def __init__(self, tool_use_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., content: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ..., is_error: bool = ..., outcome: _Optional[_Union[Outcome, str]] = ..., structured_json: _Optional[str] = ..., timing: _Optional[_Union[Timing, _Mapping]] = ..., truncation: _Optional[_Union[Truncation, _Mapping]] = ..., decided_by: _Optional[str] = ..., exit_code: _Optional[int] = ...) -> None: ...

class Resume(_message.Message):
    __slots__ = ["last_sequence", "session_id"]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    last_sequence: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., last_sequence: _Optional[int] = ...) -> None: ...

class SandboxInfo(_message.Message):
    __slots__ = ["allowed_domains", "backend", "enforced", "network", "run_as_user"]
    ALLOWED_DOMAINS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    ENFORCED_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_USER_FIELD_NUMBER: _ClassVar[int]
    allowed_domains: _containers.RepeatedScalarFieldContainer[str]
    backend: str
    enforced: _containers.RepeatedScalarFieldContainer[Protection]
    network: str
    run_as_user: str
    def __init__(self, backend: _Optional[str] = ..., enforced: _Optional[_Iterable[_Union[Protection, str]]] = ..., network: _Optional[str] = ..., run_as_user: _Optional[str] = ..., allowed_domains: _Optional[_Iterable[str]] = ...) -> None: ...

class SessionOptions(_message.Message):
    __slots__ = ["default_timeout", "lifecycle", "max_concurrency", "permission_timeout", "result_order", "sibling_abort"]
    DEFAULT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    RESULT_ORDER_FIELD_NUMBER: _ClassVar[int]
    SIBLING_ABORT_FIELD_NUMBER: _ClassVar[int]
    default_timeout: _duration_pb2.Duration
    lifecycle: Lifecycle
    max_concurrency: int
    permission_timeout: _duration_pb2.Duration
    result_order: ResultOrder
    sibling_abort: SiblingAbort
    def __init__(self, result_order: _Optional[_Union[ResultOrder, str]] = ..., sibling_abort: _Optional[_Union[SiblingAbort, str]] = ..., max_concurrency: _Optional[int] = ..., default_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., permission_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., lifecycle: _Optional[_Union[Lifecycle, str]] = ...) -> None: ...

class Settings(_message.Message):
    __slots__ = ["allow", "ask", "deny", "hooks", "mode", "network"]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    ASK_FIELD_NUMBER: _ClassVar[int]
    DENY_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    allow: _containers.RepeatedScalarFieldContainer[str]
    ask: _containers.RepeatedScalarFieldContainer[str]
    deny: _containers.RepeatedScalarFieldContainer[str]
    hooks: _containers.RepeatedCompositeFieldContainer[Hook]
    mode: PermissionMode
    network: NetworkSettings
    def __init__(self, allow: _Optional[_Iterable[str]] = ..., ask: _Optional[_Iterable[str]] = ..., deny: _Optional[_Iterable[str]] = ..., mode: _Optional[_Union[PermissionMode, str]] = ..., hooks: _Optional[_Iterable[_Union[Hook, _Mapping]]] = ..., network: _Optional[_Union[NetworkSettings, _Mapping]] = ...) -> None: ...

class Started(_message.Message):
    __slots__ = ["queue_wait", "tool_use_id"]
    QUEUE_WAIT_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    queue_wait: _duration_pb2.Duration
    tool_use_id: str
    def __init__(self, tool_use_id: _Optional[str] = ..., queue_wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class TaskNotification(_message.Message):
    __slots__ = ["exit_code", "output_path", "status", "summary", "task_id", "tool_use_id"]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PATH_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_ID_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    output_path: str
    status: str
    summary: str
    task_id: str
    tool_use_id: str
    def __init__(self, task_id: _Optional[str] = ..., tool_use_id: _Optional[str] = ..., output_path: _Optional[str] = ..., status: _Optional[str] = ..., exit_code: _Optional[int] = ..., summary: _Optional[str] = ...) -> None: ...

class TextBlock(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class Timing(_message.Message):
    __slots__ = ["finished_at", "queue_wait", "received_at", "run_time", "started_at"]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WAIT_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_TIME_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    finished_at: _timestamp_pb2.Timestamp
    queue_wait: _duration_pb2.Duration
    received_at: _timestamp_pb2.Timestamp
    run_time: _duration_pb2.Duration
    started_at: _timestamp_pb2.Timestamp
    def __init__(self, received_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., queue_wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., run_time: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ToolDefinition(_message.Message):
    __slots__ = ["aliases", "concurrency", "description", "input_schema_json", "name", "read_only"]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    aliases: _containers.RepeatedScalarFieldContainer[str]
    concurrency: Concurrency
    description: str
    input_schema_json: str
    name: str
    read_only: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., read_only: bool = ..., concurrency: _Optional[_Union[Concurrency, str]] = ..., aliases: _Optional[_Iterable[str]] = ...) -> None: ...

class ToolSet(_message.Message):
    __slots__ = ["names"]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class ToolUse(_message.Message):
    __slots__ = ["assistant_message_id", "id", "input_json", "name", "timeout", "traceparent", "tracestate"]
    ASSISTANT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    assistant_message_id: str
    id: str
    input_json: str
    name: str
    timeout: _duration_pb2.Duration
    traceparent: str
    tracestate: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., input_json: _Optional[str] = ..., assistant_message_id: _Optional[str] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class Truncation(_message.Message):
    __slots__ = ["full_output_path", "omitted_bytes", "original_bytes"]
    FULL_OUTPUT_PATH_FIELD_NUMBER: _ClassVar[int]
    OMITTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    full_output_path: str
    omitted_bytes: int
    original_bytes: int
    def __init__(self, original_bytes: _Optional[int] = ..., omitted_bytes: _Optional[int] = ..., full_output_path: _Optional[str] = ...) -> None: ...

class Lifecycle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ResultOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SiblingAbort(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PermissionMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class HookEvent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class AbortReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PermissionBehavior(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class McpServerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Protection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class RestoreAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Concurrency(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
