import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EnvoyConfig } from '../../../src/config/envoy/envoy-config.js';
import { loadEnvoyConfigFiles, type EnvoyConfigSource } from '../../../src/config/envoy/load.js';

/** A fixture as a config source named by its file name (as upstream's tests name files). */
export function source(name: string): EnvoyConfigSource {
  return { name, text: readFileSync(join(import.meta.dirname, 'fixtures', name), 'utf8') };
}

/** Loads fixtures in order into one config. */
export function loadFixtures(names: readonly string[], mergeDomainConfig = false): EnvoyConfig {
  return loadEnvoyConfigFiles(names.map(source), { mergeDomainConfig });
}

/** Entries from `key=value` strings. */
export function entries(...pairs: string[]): { key: string; value: string }[] {
  return pairs.map((p) => {
    const at = p.indexOf('=');
    return { key: p.slice(0, at), value: p.slice(at + 1) };
  });
}
