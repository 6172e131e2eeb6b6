// SPDX-License-Identifier: Apache-2.0
// plimsoll's TypeScript client (docs/clients.md).

export {
  Client,
  Session,
  type ClientOptions,
  type OpenSessionOptions,
  type ConnectSessionOptions,
  type RouteOptions,
  snippetRequest,
  projectRequest,
  moduleRequest,
  cellMessage,
  decodeErrorInfo,
} from "./client.js";
export * from "./errors.js";
export { DEFAULT_URL } from "./config.js";
export { DEFAULT_MAX_ANSWER_BYTES, MAX_ANSWER_DEPTH, MAX_ANSWER_INTEGER } from "./answer.js";
export { FILE_PATH_MAX_BYTES, WRITE_FILES_MAX_BYTES, WRITE_FILES_MAX_FILES } from "./files.js";
export { DEFAULT_MAX_MESSAGE_BYTES, type OutputChunk, type OnOutput } from "./stream.js";
export {
  canonical,
  canonicalSha256,
  sha256Hex,
  checkRecord,
  verifyChain,
  Chain,
  type ChainEntry,
  type RunRecord,
} from "./record.js";
export {
  type RetryPolicy,
  type ResolvedRetryPolicy,
  DEFAULT_RETRY,
  backoffMs,
  isRetryable,
  resolveRetry,
} from "./retry.js";
export {
  RunResult,
  StepResult,
  Artifact,
  DisplayOutput,
  mimeIsText,
  type DisplayKind,
  type DisplaySupport,
  type Usage,
  type UsageSource,
  TIERS,
  tierRank,
  decodeBase64,
  encodeBase64,
  type Tier,
  type Language,
  type RunOptions,
  type SnippetInput,
  type ProjectInput,
  type ModuleInput,
  type CellInput,
  type FileInput,
  type StepInput,
  type WireRunRequest,
  type WireCell,
  type WireFile,
  type WireStep,
  type Description,
  type OperationSupport,
  type Limits,
  type SessionInfo,
  type SessionInterpreter,
  type SessionState,
  FILE_TYPES,
  type FileType,
  type FileEntry,
  type ReadFileOptions,
  type ReadFileResult,
  type ListFilesOptions,
  type ListFilesResult,
  type WriteFilesResult,
  type UploadResult,
  type SkippedFile,
} from "./types.js";
