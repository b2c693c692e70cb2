import type { z } from 'zod';
import type { SettingValue } from '../../config/env-values.js';

/** A command-line flag that sets a setting. */
export interface SettingFlag {
  /** The commander option, e.g. `--port <n>`. */
  readonly spec: string;
  /** What the flag does, for `--help`; the variable and the default are added to it. */
  readonly help?: string;
  /** A second setting the flag implies, with the value it gives it. */
  readonly also?: { readonly setting: string; readonly value: string };
  /** The command that takes the flag when it is not `serve` (shown in the docs only). */
  readonly command?: string;
}

/**
 * One service setting: where it is read from, how, its default, where its value goes in
 * the service's options (`ServeOptions`, one nested object) and its line in the docs.
 * `sluice serve`'s options, the environment mapping, `startService`'s defaults and
 * checks, and the table in docs/cli.md are all made from these entries.
 */
export interface SettingSpec {
  /** The environment variable. */
  readonly env: string;
  /** Reads the text; unset (`undefined`) gives the default. */
  readonly value: z.ZodType<unknown, string | undefined>;
  /** The parsed default, when there is one. */
  readonly default?: unknown;
  /** Where the value goes in the options, e.g. `port`, `xds.backoff.initialMs`. */
  readonly target?: string;
  /** A group of the options (`xds`, `statsd`) that is present only when `on` holds. */
  readonly opens?: string;
  readonly on?: (value: never) => boolean;
  /** The options path built from this and other settings together (`redis`). */
  readonly feeds?: string;
  /** The empty text means unset: nothing is written at `target`. */
  readonly omitEmpty?: boolean;
  /** `startService` checks its option at `target` by this setting's rules. */
  readonly checksOption?: boolean;
  /** Command-line flags that set the same value (a flag wins over the variable). */
  readonly flags: readonly SettingFlag[];
  /** The docs table's "allowed" cell (Markdown). */
  readonly allowed: string;
  /** The docs table's "default" cell (Markdown). */
  readonly shownDefault: string;
  /** envoyproxy/ratelimit reads the same variable (docs/migrating-from-envoy-ratelimit.md lists it). */
  readonly upstream: boolean;
}

/** What a table entry gives; {@link setting} and {@link optionalSetting} fill the rest. */
export interface SettingInput<T> {
  readonly env: string;
  readonly value: SettingValue<T>;
  readonly target?: string;
  readonly opens?: string;
  /** @default the value is `true` */
  readonly on?: (value: T) => boolean;
  readonly feeds?: string;
  readonly omitEmpty?: boolean;
  readonly checksOption?: boolean;
  readonly flags?: readonly SettingFlag[];
  readonly allowed: string;
  readonly shownDefault: string;
  /** @default true */
  readonly upstream?: boolean;
}

/** A setting with a default. */
export function setting<T extends NonNullable<unknown>>(
  input: SettingInput<T> & { readonly default: T },
) {
  return {
    ...input,
    flags: input.flags ?? [],
    upstream: input.upstream ?? true,
    value: input.value.default(input.default),
  } satisfies SettingSpec;
}

/** A setting that may stay unset. */
export function optionalSetting<T>(input: SettingInput<T>) {
  return {
    ...input,
    flags: input.flags ?? [],
    upstream: input.upstream ?? true,
    value: input.value.optional(),
  } satisfies SettingSpec;
}
