import { SETTING_ENTRIES, type SettingKey } from '../service/settings/table.js';

/** A `serve` flag that sets one service setting (docs/cli.md, "Environment variables"). */
export interface ServeFlag {
  /** The commander option, e.g. `--port <n>`. */
  readonly spec: string;
  /** The setting it sets; its text is validated with the variable's. */
  readonly setting: SettingKey;
  /** `--help` text: the flag's own, then the variable and the default. */
  readonly help: string;
  /** A second setting the flag implies, with the value it gives it. */
  readonly also?: { readonly setting: SettingKey; readonly value: string };
}

/** Markdown code spans and links read as plain text in `--help`. */
const plain = (md: string): string => md.replace(/`/g, '').replace(/\[([^\]]+)\]\([^)]+\)/g, '$1');

/**
 * The `serve` flags, made from the settings table (src/service/settings/): each is an
 * entry's flag, with the entry's variable and default in its help.
 */
export const SERVE_FLAGS: readonly ServeFlag[] = SETTING_ENTRIES.flatMap(([setting, spec]) =>
  spec.flags
    .filter((f) => f.command === undefined)
    .map((f) => ({
      spec: f.spec,
      setting,
      help: `${f.help ?? plain(spec.allowed)} (env ${spec.env}; default: ${plain(spec.shownDefault)})`,
      ...(f.also === undefined
        ? {}
        : { also: { setting: f.also.setting as SettingKey, value: f.also.value } }),
    })),
);
