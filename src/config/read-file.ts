import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { PolicyError } from '../core/errors.js';

/** The message for a config file with no content (or only comments), in every format. */
export const EMPTY_FILE = 'the file is empty';

// What the file system's error codes mean, in the words a message should use.
const FS_PROBLEMS: Readonly<Record<string, string>> = Object.freeze({
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory, not a file',
  ENOTDIR: 'a part of the path is not a directory',
  ELOOP: 'symlink loop',
  ENAMETOOLONG: 'the path is too long',
  EMFILE: 'too many open files',
  ENFILE: 'too many open files',
});

/** A file system error in words, with its code: `symlink loop (ELOOP)`. */
export function fsProblem(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === undefined) return error instanceof Error ? error.message : String(error);
  return `${FS_PROBLEMS[code] ?? (error as Error).message} (${code})`;
}

function cannot(file: string, verb: string, cause: unknown): PolicyError {
  const message = `cannot ${verb}: ${fsProblem(cause)}`;
  return new PolicyError('SLUICE_ERR_CONFIG_READ', `${file}: ${message}`, {
    cause,
    issues: [{ file, path: '', message }],
  });
}

/**
 * Reads a config file as UTF-8. A failure is a `PolicyError` (`SLUICE_ERR_CONFIG_READ`)
 * naming the file and the problem (`x.yaml: cannot read: symlink loop (ELOOP)`).
 */
export async function readConfigFile(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (cause) {
    throw cannot(file, 'read', cause);
  }
}

/** A config path: a file, or a directory whose `.yaml`/`.yml` files are read. */
export interface ConfigPathListing {
  readonly isDirectory: boolean;
  /** The files to read, in name order (for a file: the file itself). */
  readonly files: readonly string[];
}

/**
 * Lists a config path: a file is itself; a directory gives its `.yaml` and `.yml`
 * files, sorted by name. Fails like {@link readConfigFile} when the path cannot be read.
 */
export async function listConfigPath(path: string): Promise<ConfigPathListing> {
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(path)).isDirectory();
  } catch (cause) {
    throw cannot(path, 'read', cause);
  }
  if (!isDirectory) return { isDirectory, files: [path] };
  let names: string[];
  try {
    names = await readdir(path);
  } catch (cause) {
    throw cannot(path, 'list the directory', cause);
  }
  return {
    isDirectory,
    files: names
      .filter((f) => /\.ya?ml$/.test(f))
      .sort()
      .map((f) => join(path, f)),
  };
}
