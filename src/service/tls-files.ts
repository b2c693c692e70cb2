import fs from 'node:fs';
import { PolicyError } from '../core/errors.js';

/** A PEM file named by a setting (the setting is named in errors). */
export interface TlsFile {
  readonly setting: string;
  readonly path: string;
}

/** Reads `file`, or throws `SLUICE_ERR_CONFIG_READ` naming the setting, the path and why. */
export function readTlsFile(file: TlsFile): Buffer {
  try {
    return fs.readFileSync(file.path);
  } catch (error) {
    const message = `${file.path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`;
    throw new PolicyError('SLUICE_ERR_CONFIG_READ', `${file.setting}: ${message}`, {
      issues: [{ path: file.setting, message }],
    });
  }
}

/** How often a watched certificate file is checked for a change, in ms. */
export const TLS_RELOAD_INTERVAL_MS = 500;

/**
 * Calls `onChange` when any of `files` changes (size, mtime or inode: a rewrite, or a
 * symlink swapped as Kubernetes does with mounted secrets). Polls with `fs.watchFile`,
 * which also sees a file replaced by a rename, where an `fs.watch` on the old inode would
 * go quiet. Returns the function that stops watching.
 */
export function watchTlsFiles(
  files: readonly TlsFile[],
  onChange: () => void,
  intervalMs = TLS_RELOAD_INTERVAL_MS,
): () => void {
  const listener = (now: fs.Stats, before: fs.Stats): void => {
    if (now.mtimeMs !== before.mtimeMs || now.size !== before.size || now.ino !== before.ino)
      onChange();
  };
  for (const f of files)
    fs.watchFile(f.path, { interval: intervalMs, persistent: false }, listener);
  return () => {
    for (const f of files) fs.unwatchFile(f.path, listener);
  };
}
