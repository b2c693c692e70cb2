/**
 * libfaketime (Debian's `faketime`, installed when missing) for a process whose clock
 * must differ from the host's: Redis reads `TIME` from the system clock, so a
 * redis-server started with {@link fakeClockEnv} answers `TIME` shifted by the offset.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ensureDebianCommand } from './debian-package.js';

/** Where Debian puts the library, per architecture. */
const LIB_DIRS = [
  '/usr/lib/x86_64-linux-gnu',
  '/lib/x86_64-linux-gnu',
  '/usr/lib/aarch64-linux-gnu',
  '/lib/aarch64-linux-gnu',
  '/usr/lib',
];

/**
 * The environment that shifts a process's wall clock by `offsetSeconds` (e.g. +5 or
 * -5): `LD_PRELOAD` of libfaketime and `FAKETIME`. The monotonic clock is left alone
 * (Redis times its own events with it).
 */
export async function fakeClockEnv(offsetSeconds: number): Promise<Record<string, string>> {
  await ensureDebianCommand('faketime', 'faketime');
  const lib = LIB_DIRS.map((d) => path.join(d, 'faketime', 'libfaketime.so.1')).find((f) =>
    fs.existsSync(f),
  );
  if (lib === undefined) {
    throw new Error(
      `libfaketime.so.1 not found under ${LIB_DIRS.join(', ')} (faketime/libfaketime installed?)`,
    );
  }
  // Debian's redis-server allocates with jemalloc, which reads the clock while it starts,
  // before libfaketime is ready: libfaketime then breaks the recursion by failing
  // clock_gettime and redis-server never comes up. glibc's malloc, preloaded first
  // (libc_malloc_debug provides it, with its checks off), serves the allocations instead.
  const glibcMalloc = LIB_DIRS.map((d) => path.join(d, 'libc_malloc_debug.so.0')).find((f) =>
    fs.existsSync(f),
  );
  return {
    LD_PRELOAD: glibcMalloc === undefined ? lib : `${glibcMalloc} ${lib}`,
    FAKETIME: `${offsetSeconds >= 0 ? '+' : ''}${offsetSeconds}s`,
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
    // Read FAKETIME once, not on every clock call.
    FAKETIME_NO_CACHE: '0',
  };
}
