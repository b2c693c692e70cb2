import { ENVOY_KEYS } from './validate-keys.js';
import {
  assignments,
  collapsed,
  goString,
  isMergeKey,
  keyIdentity,
  type GoNode,
} from './yaml-tree.js';

/** One file's `rate_limit` block, typed (upstream's YamlRateLimit). */
export interface EnvoyYamlRateLimit {
  readonly requestsPerUnit: number;
  readonly unit: string;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly string[];
}

/** One file's descriptor, typed (upstream's YamlDescriptor), plus where it is. */
export interface EnvoyYamlDescriptor {
  readonly key: string;
  readonly value: string;
  readonly rateLimit?: EnvoyYamlRateLimit;
  readonly descriptors: readonly EnvoyYamlDescriptor[];
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  readonly metadata?: Readonly<Record<string, unknown>>;
  /** The raw `sluice:` block, checked when the config is built. */
  readonly sluice?: GoNode;
  /** Path inside the file, e.g. `descriptors[0].descriptors[1]`. */
  readonly path: string;
}

/** One file's document, typed (upstream's YamlRoot). */
export interface EnvoyYamlRoot {
  readonly domain: string;
  readonly descriptors: readonly EnvoyYamlDescriptor[];
  /** The raw top-level `sluice:` block (the domain's settings), checked when built. */
  readonly sluice?: GoNode;
}

/** What decoding found besides the values. */
export interface DecodeNotes {
  /** yaml.v2-worded type errors (`line 7: cannot unmarshal !!str `abc` into uint32`). */
  readonly typeErrors: string[];
  /** Sluice-only problems: `[path, message]`. */
  readonly problems: [string, string][];
  /** Silently ignored by upstream, probably a mistake: `[path, message]`. */
  readonly warnings: [string, string][];
}

const UINT32_MAX = 4_294_967_295n;

/** yaml.v2's wording of a value that does not fit its target Go type. */
export function unmarshalError(node: GoNode, goType: string): string {
  let tag: string;
  let shown = '';
  if (node.kind === 'scalar') {
    tag = node.explicitTag !== '' ? node.explicitTag : node.plain ? node.typed.tag : '!!str';
    const bytes = Buffer.from(node.text, 'utf8');
    const text = bytes.length > 10 ? `${bytes.subarray(0, 7).toString('utf8')}...` : node.text;
    shown = ` \`${text}\``;
  } else {
    tag = node.kind === 'map' ? '!!map' : '!!seq';
  }
  return `line ${node.line}: cannot unmarshal ${tag}${shown} into ${goType}`;
}

function typeError(node: GoNode, goType: string, notes: DecodeNotes): void {
  notes.typeErrors.push(unmarshalError(node, goType));
}

/** Null as yaml.v2 sees it: no value at all (pointer fields stay unset). */
function isNullNode(node: GoNode): boolean {
  return node.kind === 'scalar' && node.typed.kind === 'nil';
}

/**
 * A null written as `null`, `~` or nothing leaves a pointer field unset; `Null` and
 * `NULL` first allocate it and then zero it (a yaml.v2 quirk kept for `rate_limit`).
 */
function isLiteralNull(node: GoNode): boolean {
  return (
    node.kind === 'scalar' &&
    (node.explicitTag === '!!null' ||
      (node.explicitTag === '' &&
        (node.text === 'null' || node.text === '~' || (node.text === '' && node.plain))))
  );
}

function decodeString(node: GoNode, notes: DecodeNotes): string {
  if (node.kind !== 'scalar') {
    typeError(node, 'string', notes);
    return '';
  }
  // Any scalar goes into a string field as written: `value: 010` is "010", not 8.
  return isNullNode(node) ? '' : node.text;
}

function decodeBool(node: GoNode, notes: DecodeNotes): boolean {
  if (isNullNode(node)) return false;
  if (node.kind === 'scalar' && node.typed.kind === 'bool') return node.typed.value === true;
  typeError(node, 'bool', notes);
  return false;
}

function decodeUint32(node: GoNode, notes: DecodeNotes): number {
  if (isNullNode(node)) return 0;
  if (node.kind === 'scalar') {
    const { kind, value } = node.typed;
    if ((kind === 'int' || kind === 'uint64') && typeof value === 'bigint') {
      if (value >= 0n && value <= UINT32_MAX) return Number(value);
    } else if (kind === 'float64' && typeof value === 'number') {
      // yaml.v2 truncates a float that fits; the key check refuses floats before this.
      const t = Math.trunc(value);
      if (value >= 0 && t <= Number(UINT32_MAX)) return t;
    }
  }
  typeError(node, 'uint32', notes);
  return 0;
}

function decodeList<T>(
  node: GoNode,
  goType: string,
  notes: DecodeNotes,
  item: (n: GoNode, index: number) => T | undefined,
): T[] {
  if (isNullNode(node)) return [];
  if (node.kind !== 'seq') {
    typeError(node, goType, notes);
    return [];
  }
  const out: T[] = [];
  node.items.forEach((n, i) => {
    const v = item(n, i);
    if (v !== undefined) out.push(v);
  });
  return out;
}

/** Converts a node to plain data the way upstream turns metadata into a protobuf Struct. */
function toPlain(node: GoNode): unknown {
  if (node.kind === 'seq') return node.items.map(toPlain);
  if (node.kind === 'map') {
    const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const p of collapsed(node)) out[goString(p.key)] = toPlain(p.value);
    return out;
  }
  const { kind, value } = node.typed;
  if (kind === 'nil') return null;
  if (kind === 'string') return node.text;
  if (typeof value === 'bigint') return Number(value);
  return value;
}

function decodeMetadata(node: GoNode, notes: DecodeNotes): Record<string, unknown> | undefined {
  if (isNullNode(node)) return undefined;
  if (node.kind !== 'map') {
    typeError(node, 'map[string]interface {}', notes);
    return undefined;
  }
  const out = toPlain(node) as Record<string, unknown>;
  return Object.keys(out).length === 0 ? undefined : out;
}

/**
 * Walks a map's assignments as yaml.v2 fills a struct: keys are read as strings,
 * unknown keys ignored (noted as warnings when they are upstream key names, since
 * they were probably meant for another level), repeated keys overwrite (noted by
 * {@link noteRepeatedKeys}).
 */
function eachField(
  node: GoNode,
  goType: string,
  path: string,
  notes: DecodeNotes,
  fields: ReadonlySet<string>,
  set: (field: string, value: GoNode) => void,
): boolean {
  if (node.kind !== 'map') {
    typeError(node, goType, notes);
    return false;
  }
  for (const { key, value } of assignments(node)) {
    const name = decodeString(key, notes);
    if (fields.has(name)) set(name, value);
    else if (ENVOY_KEYS.has(name)) {
      notes.warnings.push([path, `'${name}' has no effect here and is ignored; ${homeOf(name)}`]);
    }
  }
  return true;
}

/** Where a key that was ignored at some level does belong (for the warning). */
function homeOf(key: string): string {
  switch (key) {
    case 'domain':
      return 'it belongs at the top level';
    case 'descriptors':
      return 'it belongs at the top level or on a descriptor';
    case 'requests_per_unit':
    case 'unit':
    case 'unlimited':
    case 'replaces':
      return 'it belongs in rate_limit';
    case 'name':
      return 'it belongs in rate_limit or in a replaces entry';
    default:
      return 'it belongs on a descriptor';
  }
}

const RATE_LIMIT_FIELDS = new Set(['requests_per_unit', 'unit', 'unlimited', 'name', 'replaces']);

function decodeRateLimit(
  node: GoNode,
  path: string,
  notes: DecodeNotes,
): EnvoyYamlRateLimit | undefined {
  if (isLiteralNull(node)) return undefined;
  const rl = { requestsPerUnit: 0, unit: '', unlimited: false, name: '', replaces: [] as string[] };
  if (isNullNode(node)) return rl;
  eachField(node, 'config.YamlRateLimit', path, notes, RATE_LIMIT_FIELDS, (field, value) => {
    if (field === 'requests_per_unit') rl.requestsPerUnit = decodeUint32(value, notes);
    else if (field === 'unit') rl.unit = decodeString(value, notes);
    else if (field === 'unlimited') rl.unlimited = decodeBool(value, notes);
    else if (field === 'name') rl.name = decodeString(value, notes);
    else {
      rl.replaces = decodeList(value, '[]config.yamlReplaces', notes, (item, i) => {
        let name = '';
        if (isNullNode(item)) return name;
        const ok = eachField(
          item,
          'config.yamlReplaces',
          `${path}.replaces[${i}]`,
          notes,
          new Set(['name']),
          (_f, v) => {
            name = decodeString(v, notes);
          },
        );
        return ok ? name : undefined;
      });
    }
  });
  return rl;
}

const DESCRIPTOR_FIELDS = new Set([
  'key',
  'value',
  'rate_limit',
  'descriptors',
  'shadow_mode',
  'quota_mode',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'metadata',
  'sluice',
]);

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function decodeDescriptor(
  node: GoNode,
  path: string,
  notes: DecodeNotes,
): EnvoyYamlDescriptor | undefined {
  const d: Mutable<EnvoyYamlDescriptor> = {
    key: '',
    value: '',
    descriptors: [],
    shadowMode: false,
    quotaMode: false,
    detailedMetric: false,
    valueToMetric: false,
    shareThreshold: false,
    path,
  };
  if (isNullNode(node)) return d;
  const ok = eachField(node, 'config.YamlDescriptor', path, notes, DESCRIPTOR_FIELDS, (f, v) => {
    if (f === 'key') d.key = decodeString(v, notes);
    else if (f === 'value') d.value = decodeString(v, notes);
    else if (f === 'rate_limit') {
      const rl = decodeRateLimit(v, `${path}.rate_limit`, notes);
      if (rl === undefined) delete d.rateLimit;
      else d.rateLimit = rl;
    } else if (f === 'descriptors') d.descriptors = decodeDescriptors(v, path, notes);
    else if (f === 'shadow_mode') d.shadowMode = decodeBool(v, notes);
    else if (f === 'quota_mode') d.quotaMode = decodeBool(v, notes);
    else if (f === 'detailed_metric') d.detailedMetric = decodeBool(v, notes);
    else if (f === 'value_to_metric') d.valueToMetric = decodeBool(v, notes);
    else if (f === 'share_threshold') d.shareThreshold = decodeBool(v, notes);
    else if (f === 'metadata') {
      const m = decodeMetadata(v, notes);
      if (m === undefined) delete d.metadata;
      else d.metadata = m;
    } else if (isNullNode(v)) delete d.sluice;
    else d.sluice = v;
  });
  return ok ? d : undefined;
}

function decodeDescriptors(
  node: GoNode,
  parent: string,
  notes: DecodeNotes,
): EnvoyYamlDescriptor[] {
  const prefix = parent === '' ? 'descriptors' : `${parent}.descriptors`;
  return decodeList(node, '[]config.YamlDescriptor', notes, (item, i) =>
    decodeDescriptor(item, `${prefix}[${i}]`, notes),
  );
}

/**
 * Notes every key written twice in one map, anywhere in the document (metadata and
 * `sluice:` blocks included). yaml.v2's `Unmarshal`, which upstream uses, keeps the last
 * value without a word (only its `UnmarshalStrict` refuses repeats); Sluice keeps the
 * last value too and says so. A key that overrides what a `<<` merge brought in is
 * intended and not noted. A node reached through several aliases is noted once.
 */
function noteRepeatedKeys(
  node: GoNode,
  path: string,
  notes: DecodeNotes,
  visited = new Set<GoNode>(),
): void {
  if (visited.has(node)) return;
  visited.add(node);
  if (node.kind === 'seq') {
    node.items.forEach((item, i) => noteRepeatedKeys(item, `${path}[${i}]`, notes, visited));
    return;
  }
  if (node.kind !== 'map') return;
  const seen = new Set<string>();
  for (const { key, value } of node.pairs) {
    const id = isMergeKey(key) ? undefined : keyIdentity(key);
    if (id !== undefined && key.kind === 'scalar') {
      if (seen.has(id)) {
        notes.warnings.push([path, `'${key.text}' is given more than once; the last one is used`]);
      }
      seen.add(id);
    }
    const child =
      key.kind !== 'scalar' || isMergeKey(key)
        ? path
        : path === ''
          ? key.text
          : `${path}.${key.text}`;
    noteRepeatedKeys(value, child, notes, visited);
  }
}

/**
 * Reports `sluice:` blocks anywhere but on a descriptor or at the top level (they would be
 * ignored).
 */
function findMisplacedSluice(node: GoNode, path: string, notes: DecodeNotes, top: boolean): void {
  if (node.kind === 'seq') {
    node.items.forEach((item, i) => findMisplacedSluice(item, `${path}[${i}]`, notes, false));
    return;
  }
  if (node.kind !== 'map') return;
  for (const { key, value } of collapsed(node)) {
    if (key.kind !== 'scalar') continue;
    const child = path === '' ? key.text : `${path}.${key.text}`;
    if (key.text === 'sluice' && !top && !/descriptors\[\d+\]$/.test(path)) {
      notes.problems.push([
        child,
        'a sluice block belongs on a descriptor, beside rate_limit, or at the top level (the domain)',
      ]);
    } else if (key.text !== 'metadata' && key.text !== 'sluice') {
      findMisplacedSluice(value, child, notes, false);
    }
  }
}

/**
 * Decodes a key-checked document the way upstream fills its YamlRoot: type mismatches
 * are collected as yaml.v2 words them, unknown fields are skipped.
 */
export function decodeRoot(root: GoNode | undefined): { root: EnvoyYamlRoot; notes: DecodeNotes } {
  const notes: DecodeNotes = { typeErrors: [], problems: [], warnings: [] };
  const out: Mutable<EnvoyYamlRoot> = { domain: '', descriptors: [] };
  if (root !== undefined && !isNullNode(root)) {
    noteRepeatedKeys(root, '', notes);
    findMisplacedSluice(root, '', notes, true);
    const fields = new Set(['domain', 'descriptors', 'sluice']);
    eachField(root, 'config.YamlRoot', '', notes, fields, (f, v) => {
      if (f === 'domain') out.domain = decodeString(v, notes);
      else if (f === 'descriptors') out.descriptors = decodeDescriptors(v, '', notes);
      else if (isNullNode(v)) delete out.sluice;
      else out.sluice = v;
    });
  }
  return { root: out, notes };
}
