// Types for sqsim's Node API (index.js). The SDK is an optional peer dependency: without it,
// client() is typed from whatever "@aws-sdk/client-sqs" resolves to (nothing, with skipLibCheck).
import type { SQSClient, SQSClientConfig } from "@aws-sdk/client-sqs";

export interface StartOptions {
  /** Extra command-line flags, after `--port 0` (see `npx sqsim --help`). */
  args?: string[];
  /** Environment variables for the server, over this process's own. */
  env?: Record<string, string>;
  /** The sqsim binary to run instead of the installed one (or set SQSIM_BINARY_PATH). */
  binary?: string;
}

/** One message as GET /_sqsim/peek shows it. */
export interface PeekedMessage {
  message_id: string;
  body: string;
  state: "visible" | "in_flight" | "delayed";
  until_ms: number | null;
  receive_count: number;
  sent_timestamp: number;
  first_receive_timestamp: number | null;
  message_attributes: Record<string, unknown>;
  message_group_id: string | null;
  message_deduplication_id: string | null;
  sequence_number: string | null;
  [field: string]: unknown;
}

export interface PeekResult {
  /** The queue's ARN. */
  queue: string;
  messages: PeekedMessage[];
  total: number;
  offset: number;
  next_offset: number | null;
}

export interface Sqsim {
  /** "http://127.0.0.1:PORT" */
  readonly endpoint: string;
  /** The server's process id. */
  readonly pid: number;
  /** A new SQSClient for this server (region us-east-1, credentials test/test); `config` wins. */
  client(config?: Partial<SQSClientConfig>): SQSClient;
  /** Deletes every queue (or what `scope` names: `{ queue_url }`, `{ account, region }`). */
  reset(scope?: { queue_url?: string; account?: string; region?: string }): Promise<unknown>;
  /** Moves the server's clock forward: visibility timeouts, delays, retention all follow it. */
  advance(seconds: number): Promise<{ now_ms: number; frozen: boolean }>;
  /** Stops the clock from following real time (advance() still moves it). */
  freeze(): Promise<{ now_ms: number; frozen: boolean }>;
  unfreeze(): Promise<{ now_ms: number; frozen: boolean }>;
  /**
   * A queue's messages and their states, changing nothing. `queue`: a name or a queue URL;
   * `region` for a queue outside the default region; `offset`/`limit` page through.
   */
  peek(queue: string, params?: { offset?: number; limit?: number; region?: string }): Promise<PeekResult>;
  /** SIGTERM, then SIGKILL after 5 s; resolves once the server has exited. Safe to call twice. */
  stop(): Promise<void>;
}

/** Starts sqsim on a free port of 127.0.0.1; resolves once it listens. */
export function startSqsim(options?: StartOptions): Promise<Sqsim>;

/** The path of the sqsim binary that would run: $SQSIM_BINARY_PATH or the platform package's. */
export function binaryPath(): string;
