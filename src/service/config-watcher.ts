import { watch, type FSWatcher } from 'node:fs';
import { lstat, readdir, readlink, realpath, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';

/** A path whose changes reload the config. */
export interface WatchedPath {
  readonly path: string;
  /** A directory whose entries count too: a file added, removed, replaced or written in it. */
  readonly entries: boolean;
}

/** Options of {@link ConfigWatcher}. */
export interface ConfigWatcherOptions {
  /** Quiet time after the last change before reloading, in ms. @default 100 */
  readonly debounceMs?: number;
  /** Told about a directory that cannot be watched, or a watch that failed. @default ignore */
  readonly onWatchError?: (error: unknown, dir: string) => void;
}

/** What reloading returned: the paths to watch from now on, or `undefined` to keep the old ones. */
export type Reload = () => Promise<readonly WatchedPath[] | undefined>;

/** Where one path can change: entry `name` (or any entry, `*`) of directory `dir`. */
interface WatchPoint {
  readonly dir: string;
  readonly name: string;
}

const ANY = '*';
/** As the kernel: past this many symlinks a path is a loop, which the loader reports. */
const MAX_SYMLINK_HOPS = 40;

/**
 * Every place a change to `path` shows up: the entry of each symlink met while resolving
 * it (a swapped root or a Kubernetes `..data` link is replaced there), the final entry in
 * its real parent directory (an atomic replace renames over it there, so the file's own
 * inode is never written), and with `entries` the real directory itself. A missing
 * component is watched in the last directory that exists, so its creation is seen.
 */
export async function watchPoints(target: WatchedPath): Promise<WatchPoint[]> {
  const points: WatchPoint[] = [];
  let parts = resolve(target.path).split(sep).filter(Boolean);
  let dir: string = sep;
  let hops = 0;
  while (parts.length > 0) {
    const name = parts.shift()!;
    if (name === '.') continue;
    if (name === '..') {
      dir = dirname(dir);
      continue;
    }
    const full = join(dir, name);
    let info;
    try {
      info = await lstat(full);
    } catch {
      points.push({ dir, name });
      return points;
    }
    if (info.isSymbolicLink()) {
      points.push({ dir, name });
      if (++hops > MAX_SYMLINK_HOPS) return points;
      const link = await readlink(full);
      parts = [...link.split(sep).filter(Boolean), ...parts];
      if (isAbsolute(link)) dir = sep;
      continue;
    }
    if (parts.length === 0) {
      points.push({ dir, name });
      if (target.entries && info.isDirectory()) points.push({ dir: full, name: ANY });
    }
    dir = full;
  }
  return points;
}

interface DirWatch {
  readonly watcher: FSWatcher;
  /** `dev:ino` of the directory watched: a directory replaced under the same name is watched anew. */
  readonly id: string;
  names: Set<string>;
}

/**
 * Watches config paths and reloads on every change, across atomic replaces (`mv`,
 * `sed -i`, editors' rename-over), symlink swaps and files added to watched directories.
 *
 * A watch on a file follows its inode, which an atomic replace retires: so directories
 * are watched, never files, and each event is matched by entry name. After every
 * reload the paths are resolved again and the watches moved to where the symlinks now
 * point, before the new config is read, so a change made while reading is seen.
 * Changes within `debounceMs` of each other reload once; reloads never overlap.
 */
export class ConfigWatcher {
  readonly #reload: Reload;
  readonly #debounceMs: number;
  readonly #onWatchError: (error: unknown, dir: string) => void;
  readonly #dirs = new Map<string, DirWatch>();
  #paths: readonly WatchedPath[];
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #closed = false;

  constructor(paths: readonly WatchedPath[], reload: Reload, options: ConfigWatcherOptions = {}) {
    this.#paths = paths;
    this.#reload = reload;
    this.#debounceMs = options.debounceMs ?? 100;
    this.#onWatchError = options.onWatchError ?? (() => {});
  }

  /** Arms the watches on the current paths. */
  async start(): Promise<void> {
    await this.#arm();
  }

  /** Stops watching; a reload in progress finishes. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    for (const d of this.#dirs.values()) d.watcher.close();
    this.#dirs.clear();
  }

  #changed(): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#run(), this.#debounceMs);
  }

  #run(): void {
    if (this.#running !== undefined) {
      this.#again = true; // one more reload once this one is done
      return;
    }
    this.#running = (async () => {
      do {
        this.#again = false;
        await this.#arm();
        const next = await this.#reload().catch(() => undefined);
        if (this.#closed) return;
        if (next !== undefined) {
          this.#paths = next;
          await this.#arm();
        }
      } while (this.#again && !this.#closed);
    })().finally(() => (this.#running = undefined));
  }

  /** Resolves every path again and moves the directory watches to match. */
  async #arm(): Promise<void> {
    const wanted = new Map<string, Set<string>>();
    for (const p of this.#paths) {
      for (const point of await watchPoints(p).catch(() => [])) {
        let names = wanted.get(point.dir);
        if (names === undefined) wanted.set(point.dir, (names = new Set()));
        names.add(point.name);
      }
    }
    if (this.#closed) return;
    for (const [dir, d] of this.#dirs) {
      if (!wanted.has(dir)) {
        d.watcher.close();
        this.#dirs.delete(dir);
      }
    }
    const fresh: string[] = [];
    for (const [dir, names] of wanted) {
      const id = await stat(dir).then(
        (s) => `${s.dev}:${s.ino}`,
        () => undefined,
      );
      if (this.#closed) return;
      const current = this.#dirs.get(dir);
      if (current !== undefined && current.id === id) {
        current.names = names;
        continue;
      }
      current?.watcher.close();
      this.#dirs.delete(dir);
      if (id === undefined) continue; // gone meanwhile: the change that removed it reloads
      try {
        const d: DirWatch = {
          id,
          names,
          watcher: watch(dir, { persistent: false }, (_event, name) => {
            if (d.names.has(ANY) || name === null || d.names.has(name)) this.#changed();
          }),
        };
        d.watcher.on('error', (error) => {
          this.#onWatchError(error, dir);
          d.watcher.close();
          if (this.#dirs.get(dir) === d) this.#dirs.delete(dir);
          this.#changed();
        });
        this.#dirs.set(dir, d);
        if (names.has(ANY)) fresh.push(dir);
      } catch (error) {
        this.#onWatchError(error, dir);
      }
    }
    if (fresh.length > 0 && (await this.#unread(fresh))) this.#changed();
  }

  /**
   * Whether a directory watched only now already holds a config file that the last load
   * did not read. A directory is learnt from the load that lists it (`config/team/` made
   * after the reload began), so a file written into it before its watch was armed raised
   * no event: it is caught here instead.
   */
  async #unread(dirs: readonly string[]): Promise<boolean> {
    const read = new Set<string>();
    for (const p of this.#paths) {
      if (!p.entries) read.add(await realpath(p.path).catch(() => resolve(p.path)));
    }
    for (const dir of dirs) {
      const names = await readdir(dir).catch(() => [] as string[]);
      for (const name of names) {
        if (!/\.ya?ml$/.test(name)) continue;
        const file = await realpath(join(dir, name)).catch(() => undefined);
        if (file !== undefined && !read.has(file)) return true;
      }
    }
    return false;
  }
}
