// SPDX-License-Identifier: Apache-2.0
// The errors of the plimsoll client (docs/clients.md, "Three channels").
//
// A run that ran is a result, whatever its exit code; everything else is one
// of these.  Every class sets its own prototype and name, so `instanceof`
// and `err.name` work whatever the compilation target.

/** Metadata of the Connect error's google.rpc.ErrorInfo (`dispatched`, `isolation`, …). */
export type ErrorMetadata = Record<string, string>;

/** The base of every error this client throws on purpose. */
export class PlimsollError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "PlimsollError";
  }
}

/** What every refusal and infrastructure error carries. */
export interface ConnectErrorFields {
  /** `details[0].debug.reason` of the Connect error (`""` when it had none). */
  reason: string;
  /** The Connect code (`"invalid_argument"`, `"resource_exhausted"`, …). */
  code: string;
  /** The daemon's message. */
  message: string;
  /** Whether the code may have run. */
  dispatched: boolean;
  /** The ErrorInfo metadata. */
  metadata: ErrorMetadata;
  /** The HTTP status of the answer (0 when there was no answer). */
  httpStatus: number;
}

/**
 * A typed refusal: the daemon answered with a Connect error whose reason is
 * not `INTERNAL`.  Nothing ran (`dispatched` is false for every refusal).
 * An unknown reason gives a plain `RefusalError`; each known reason has its
 * own subclass.
 */
export class RefusalError extends PlimsollError {
  readonly reason: string;
  readonly code: string;
  readonly dispatched: boolean;
  readonly metadata: ErrorMetadata;
  readonly httpStatus: number;

  constructor(fields: ConnectErrorFields) {
    super(fields.message);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "RefusalError";
    this.reason = fields.reason;
    this.code = fields.code;
    this.dispatched = fields.dispatched;
    this.metadata = { ...fields.metadata };
    this.httpStatus = fields.httpStatus;
  }
}

/** `INVALID_REQUEST`: malformed request, unknown field, a bound exceeded, … */
export class InvalidRequestError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "InvalidRequestError";
  }
}

/** `UNAUTHENTICATED`: no bearer key, or a key the daemon does not know. */
export class UnauthenticatedError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "UnauthenticatedError";
  }
}

/** `DISABLED`: the daemon runs the Disabled provider. */
export class DisabledError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "DisabledError";
  }
}

/** `INSUFFICIENT_ISOLATION`: the floor is above the daemon's tier (`metadata.isolation`). */
export class InsufficientIsolationError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "InsufficientIsolationError";
  }
}

/** `UNSUPPORTED`: the provider does not run this kind, language or method. */
export class UnsupportedError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "UnsupportedError";
  }
}

/** `CALLER_NOT_ALLOWED`: the caller is not in the grant profile's `allowed_callers`. */
export class CallerNotAllowedError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "CallerNotAllowedError";
  }
}

/** `NOT_READY`: the provider's readiness check fails; try later. */
export class NotReadyError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "NotReadyError";
  }
}

/** `SHUTTING_DOWN`: the daemon is draining; try elsewhere. */
export class ShuttingDownError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "ShuttingDownError";
  }
}

/** `RATE_LIMITED`: the caller's token bucket is empty (retried when a retry policy is set). */
export class RateLimitedError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "RateLimitedError";
  }
}

/** `AT_CAPACITY`: every run slot, or the caller's share, is busy (retried when a retry policy is set). */
export class AtCapacityError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "AtCapacityError";
  }
}

/** `SESSION_ENDED`: the session has ended; `endedReason` says why. */
export class SessionEndedError extends RefusalError {
  /** Why the session ended: `metadata.ended_reason`, or the message when the daemon sent none. */
  readonly endedReason: string;

  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "SessionEndedError";
    const r = fields.metadata["ended_reason"];
    this.endedReason = typeof r === "string" && r !== "" ? r : fields.message;
  }
}

/** `NOT_FOUND`: no such path, method, or session for this caller. */
export class NotFoundError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "NotFoundError";
  }
}

/**
 * `WRONG_ROUTE`: the call named another daemon's route (the session's,
 * sent as `Plimsoll-Route`), so the session's daemon was not reached:
 * behind a proxy, that daemon is gone or draining.  The session is out of
 * reach; nothing ran.
 */
export class WrongRouteError extends RefusalError {
  constructor(fields: ConnectErrorFields) {
    super(fields);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "WrongRouteError";
  }
}

/**
 * `INTERNAL`, a transport failure (the daemon unreachable, the connection
 * cut), the call's timeout (code `deadline_exceeded`), or an answer that
 * breaks the protocol (a `ProtocolError`).  `dispatched` is true unless the
 * daemon said otherwise: the code may have run.  Never retried
 * automatically.
 */
export class InfrastructureError extends PlimsollError {
  readonly reason: string;
  readonly code: string;
  readonly dispatched: boolean;
  readonly metadata: ErrorMetadata;
  readonly httpStatus: number;

  constructor(fields: ConnectErrorFields, options?: { cause?: unknown }) {
    super(fields.message, options);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "InfrastructureError";
    this.reason = fields.reason;
    this.code = fields.code;
    this.dispatched = fields.dispatched;
    this.metadata = { ...fields.metadata };
    this.httpStatus = fields.httpStatus;
  }
}

/**
 * An answer the protocol does not allow (docs/clients.md, "What a client
 * reads"): longer than the client's `maxAnswerBytes`, a 200 that is not
 * `application/json`, text that is not JSON in UTF-8, nested past 64, a
 * member twice, a number that is not an integer of at most 2^53-1, a known
 * member of the wrong type, a SessionInfo without its session_id, with a
 * state other than ready, paused or ended, or about another session than
 * the one asked for, or an error answer that is not a Connect error.  An `InfrastructureError` (code `unknown`, dispatched: the code
 * may have run).
 */
export class ProtocolError extends InfrastructureError {
  constructor(fields: ConnectErrorFields, options?: { cause?: unknown }) {
    super(fields, options);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "ProtocolError";
  }
}

/**
 * The request set a floor (`minimum_isolation`) and the 200 answer's
 * `isolation`, or its record's, is below it.  The code may have run
 * (`dispatched` is true); never retried automatically.
 */
export class IsolationEvidenceMismatchError extends PlimsollError {
  readonly code = "data_loss";
  readonly dispatched = true;
  /** The floor the request set. */
  readonly minimumIsolation: string;
  /** The answer's top-level `isolation`. */
  readonly isolation: string;
  /** The record's `isolation` (`undefined` when the answer had no record). */
  readonly recordIsolation: string | undefined;
  /** The whole 200 answer, as parsed. */
  readonly response: Record<string, unknown>;

  constructor(
    message: string,
    minimumIsolation: string,
    isolation: string,
    recordIsolation: string | undefined,
    response: Record<string, unknown>,
  ) {
    super(message);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "IsolationEvidenceMismatchError";
    this.minimumIsolation = minimumIsolation;
    this.isolation = isolation;
    this.recordIsolation = recordIsolation;
    this.response = response;
  }
}

/** The name of the record check that failed, in the order they are made. */
export type ChainCheck =
  | "version"
  | "digest"
  | "request_sha256"
  | "response_sha256"
  | "previous_digest"
  | "ended_at";

/**
 * A record or chain check failed (docs/clients.md, "Records and chains").
 * `index` is the entry's position in the chain (0 for a record checked
 * alone) and `broken` the first check that failed.
 */
export class ChainError extends PlimsollError {
  readonly index: number;
  readonly broken: ChainCheck;

  constructor(index: number, broken: ChainCheck, message: string) {
    super(message);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "ChainError";
    this.index = index;
    this.broken = broken;
  }
}

/**
 * The client's own settings are wrong (docs/clients.md, "Configuration"):
 * no URL where there is no `process.env` to read one from, a URL that is
 * not one, a key that cannot be sent (a line break, a control character,
 * …; the message says what, never the key), or a key file
 * (`PLIMSOLL_KEY_FILE`) that cannot be read or holds no key (`path` names
 * it).  Thrown by the constructor (by the first call where the key file
 * can only be read asynchronously), before anything is sent.  Code
 * `invalid_argument`, not dispatched.
 */
export class ConfigurationError extends PlimsollError {
  readonly code = "invalid_argument";
  readonly dispatched = false;
  /** The key file that could not be read, if that is what is wrong. */
  readonly path: string | undefined;

  constructor(message: string, path?: string, options?: { cause?: unknown }) {
    super(message, options);
    Object.setPrototypeOf(this, new.target.prototype);
    this.name = "ConfigurationError";
    this.path = path;
  }
}

type RefusalClass = new (fields: ConnectErrorFields) => RefusalError;

/** The refusal class of each known reason. */
export const REFUSALS: Readonly<Record<string, RefusalClass>> = Object.freeze({
  INVALID_REQUEST: InvalidRequestError,
  UNAUTHENTICATED: UnauthenticatedError,
  DISABLED: DisabledError,
  INSUFFICIENT_ISOLATION: InsufficientIsolationError,
  UNSUPPORTED: UnsupportedError,
  CALLER_NOT_ALLOWED: CallerNotAllowedError,
  NOT_READY: NotReadyError,
  SHUTTING_DOWN: ShuttingDownError,
  RATE_LIMITED: RateLimitedError,
  AT_CAPACITY: AtCapacityError,
  SESSION_ENDED: SessionEndedError,
  NOT_FOUND: NotFoundError,
  WRONG_ROUTE: WrongRouteError,
});

/**
 * The error for a Connect error answer: `InfrastructureError` for
 * `INTERNAL`, the reason's refusal class otherwise (`RefusalError` for a
 * reason this client does not know).
 */
export function errorFromConnect(fields: ConnectErrorFields): RefusalError | InfrastructureError {
  if (fields.reason === "INTERNAL" || (fields.reason === "" && fields.code === "internal")) {
    return new InfrastructureError(fields);
  }
  const cls = Object.prototype.hasOwnProperty.call(REFUSALS, fields.reason)
    ? REFUSALS[fields.reason]
    : undefined;
  return cls ? new cls(fields) : new RefusalError(fields);
}
