import {
  LineCounter,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  parseAllDocuments,
  type Document,
} from 'yaml';
import { goFloat, shortTag, typeScalar, type TypedScalar } from './yaml-scalar.js';

/**
 * A YAML document as gopkg.in/yaml.v2 sees it, which is what envoyproxy/ratelimit
 * validates: scalars typed by YAML 1.1 rules, aliases replaced by the anchored node,
 * 1-based lines for messages. Maps keep every key/value pair in order, including
 * repeated keys and `<<` merge keys; {@link assignments} applies them.
 */
export type GoNode = GoScalarNode | GoMapNode | GoSeqNode;

export interface GoScalarNode {
  readonly kind: 'scalar';
  readonly line: number;
  /** The scalar's text as written (quotes removed, escapes applied). */
  readonly text: string;
  readonly typed: TypedScalar;
  /** Explicit tag in short form (`!!int`), or '' when none was written. */
  readonly explicitTag: string;
  /** Written unquoted (not quoted, not a block scalar). */
  readonly plain: boolean;
}

export interface GoPair {
  readonly key: GoNode;
  readonly value: GoNode;
}

export interface GoMapNode {
  readonly kind: 'map';
  readonly line: number;
  readonly pairs: readonly GoPair[];
}

export interface GoSeqNode {
  readonly kind: 'seq';
  readonly line: number;
  readonly items: readonly GoNode[];
}

/** The first document of a YAML text, or why it could not be read. */
export type GoYamlDocument =
  | {
      readonly ok: true;
      /** Undefined for an empty document. */
      readonly root: GoNode | undefined;
      /** Documents after the first (yaml.v2 reads only the first). */
      readonly ignoredDocuments: number;
    }
  | { readonly ok: false; readonly message: string };

/** Expanded node count above which a document is refused (alias bombs). */
const MAX_EXPANDED_NODES = 1_000_000;

class YamlFailure extends Error {}

const nullScalar = (line: number): GoScalarNode => ({
  kind: 'scalar',
  line,
  text: '',
  typed: { tag: '!!null', kind: 'nil', value: null },
  explicitTag: '',
  plain: true,
});

/** Whether a map key is a merge key (`<<` unquoted, or tagged `!!merge`). */
export function isMergeKey(key: GoNode): boolean {
  return (
    key.kind === 'scalar' &&
    key.text === '<<' &&
    ((key.plain && key.explicitTag === '') || key.explicitTag === '!!merge')
  );
}

class Converter {
  private readonly memo = new Map<unknown, GoNode>();
  private readonly inProgress = new Set<unknown>();
  private readonly sizes = new WeakMap<GoNode, number>();

  constructor(
    private readonly doc: Document.Parsed,
    private readonly lines: LineCounter,
  ) {}

  private lineOf(node: { range?: readonly number[] | null | undefined }, fallback: number): number {
    const offset = node.range?.[0];
    return offset === undefined ? fallback : this.lines.linePos(offset).line;
  }

  convert(node: unknown, fallbackLine: number): GoNode {
    if (node === null || node === undefined) return nullScalar(fallbackLine);
    if (isAlias(node)) {
      const target = node.resolve(this.doc);
      if (target === undefined) throw new YamlFailure(`unknown anchor '${node.source}' referenced`);
      if (this.inProgress.has(target)) {
        throw new YamlFailure(`anchor '${node.source}' value contains itself`);
      }
      return this.convert(target, fallbackLine);
    }
    const known = this.memo.get(node);
    if (known !== undefined) return known;
    this.inProgress.add(node);
    const out = this.convertFresh(node, fallbackLine);
    this.inProgress.delete(node);
    this.memo.set(node, out);
    return out;
  }

  private convertFresh(node: unknown, fallbackLine: number): GoNode {
    if (isScalar(node)) {
      const line = this.lineOf(node, fallbackLine);
      const text = node.source ?? String(node.value);
      const plain = node.type === 'PLAIN';
      const typed = typeScalar(text, node.tag, plain);
      if ('error' in typed) throw new YamlFailure(typed.error);
      const explicitTag = node.tag === undefined ? '' : shortTag(node.tag);
      return { kind: 'scalar', line, text, typed, explicitTag, plain };
    }
    if (isMap(node)) {
      const line = this.lineOf(node, fallbackLine);
      const pairs = node.items.map((pair): GoPair => {
        const key = this.convert(pair.key, line);
        return { key, value: this.convert(pair.value, key.line) };
      });
      return { kind: 'map', line, pairs };
    }
    if (isSeq(node)) {
      const line = this.lineOf(node, fallbackLine);
      return { kind: 'seq', line, items: node.items.map((item) => this.convert(item, line)) };
    }
    throw new YamlFailure('unsupported YAML node');
  }

  /** Node count with aliases expanded. */
  size(node: GoNode): number {
    const known = this.sizes.get(node);
    if (known !== undefined) return known;
    let n = 1;
    if (node.kind === 'map') for (const p of node.pairs) n += this.size(p.key) + this.size(p.value);
    if (node.kind === 'seq') for (const i of node.items) n += this.size(i);
    const capped = Math.min(n, MAX_EXPANDED_NODES + 1);
    this.sizes.set(node, capped);
    return capped;
  }
}

/** Checks every `<<` value: a map, or a sequence of maps (yaml.v2 refuses anything else). */
function checkMerges(node: GoNode, seen = new Set<GoNode>()): void {
  if (seen.has(node)) return;
  seen.add(node);
  if (node.kind === 'seq') node.items.forEach((i) => checkMerges(i, seen));
  if (node.kind !== 'map') return;
  for (const { key, value } of node.pairs) {
    if (isMergeKey(key)) {
      const ok =
        value.kind === 'map' ||
        (value.kind === 'seq' && value.items.every((i) => i.kind === 'map'));
      if (!ok) throw new YamlFailure('map merge requires map or sequence of maps as the value');
    }
    checkMerges(key, seen);
    checkMerges(value, seen);
  }
}

function firstLine(message: string): string {
  const head = message.split('\n')[0] ?? message;
  const at = head.lastIndexOf(' at line ');
  return at > 0 ? head.slice(0, at) : head;
}

/**
 * Reads the first document of `text`. Failures carry a yaml.v2-style message starting
 * with `yaml: ` (`yaml: line 2: ...` for syntax errors; the wording after the line
 * number is this parser's, not libyaml's).
 */
export function parseGoYaml(text: string): GoYamlDocument {
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, {
    version: '1.1',
    schema: 'failsafe',
    merge: false,
    uniqueKeys: false,
    lineCounter: lines,
  });
  const docList = Array.isArray(docs) ? docs : [];
  const doc = docList[0];
  if (doc === undefined) return { ok: true, root: undefined, ignoredDocuments: 0 };
  const error = doc.errors.find((e) => e.code !== 'TAG_RESOLVE_FAILED');
  if (error !== undefined) {
    const line = error.linePos?.[0].line ?? 1;
    return { ok: false, message: `yaml: line ${line}: ${firstLine(error.message)}` };
  }
  try {
    const converter = new Converter(doc, lines);
    const root = doc.contents === null ? undefined : converter.convert(doc.contents, 1);
    if (root !== undefined) {
      if (converter.size(root) > MAX_EXPANDED_NODES) {
        throw new YamlFailure('document contains excessive aliasing');
      }
      checkMerges(root);
    }
    return { ok: true, root, ignoredDocuments: docList.length - 1 };
  } catch (e) {
    if (e instanceof YamlFailure) return { ok: false, message: `yaml: ${e.message}` };
    throw e;
  }
}

/**
 * The key/value assignments of a map in the order yaml.v2 applies them: a `<<` merge
 * applies the merged map's assignments at its position (for a sequence of maps, the
 * last map first, so earlier maps win), and a later assignment to the same key
 * overwrites an earlier one.
 */
export function assignments(map: GoMapNode): GoPair[] {
  const out: GoPair[] = [];
  for (const pair of map.pairs) {
    if (!isMergeKey(pair.key)) {
      out.push(pair);
    } else if (pair.value.kind === 'map') {
      out.push(...assignments(pair.value));
    } else if (pair.value.kind === 'seq') {
      for (const item of [...pair.value.items].reverse()) {
        if (item.kind === 'map') out.push(...assignments(item));
      }
    }
  }
  return out;
}

/** Identity of a scalar key as a Go `interface{}` map key (type and value). */
export function keyIdentity(key: GoNode): string | undefined {
  if (key.kind !== 'scalar') return undefined;
  const { kind, value } = key.typed;
  return `${kind}:${typeof value === 'number' && Number.isNaN(value) ? 'NaN' : String(value)}`;
}

/**
 * The map as a Go map: one entry per distinct key, holding the last assignment, in
 * order of first appearance. Collection keys are kept (callers report them).
 */
export function collapsed(map: GoMapNode): GoPair[] {
  const byKey = new Map<string, number>();
  const out: GoPair[] = [];
  for (const pair of assignments(map)) {
    const id = keyIdentity(pair.key);
    const at = id === undefined ? undefined : byKey.get(id);
    if (at === undefined) {
      if (id !== undefined) byKey.set(id, out.length);
      out.push(pair);
    } else {
      out[at] = pair;
    }
  }
  return out;
}

/** Go's `%v` of a node's value as yaml.v2 decodes it into `interface{}`. */
export function goString(node: GoNode): string {
  if (node.kind === 'seq') return `[${node.items.map(goString).join(' ')}]`;
  if (node.kind === 'map') {
    const parts = collapsed(node).map((p) => `${goString(p.key)}:${goString(p.value)}`);
    return `map[${parts.sort().join(' ')}]`;
  }
  const { kind, value } = node.typed;
  if (kind === 'nil') return '<nil>';
  if (kind === 'string') return node.text;
  if (kind === 'float64' && typeof value === 'number') return goFloat(value);
  return String(value);
}

/** Go's `%#v` of a node decoded into `interface{}` (scalars quoted as Go does). */
function goSyntax(node: GoNode): string {
  if (node.kind === 'seq') return `[]interface {}{${node.items.map(goSyntax).join(', ')}}`;
  if (node.kind === 'map') {
    const parts = collapsed(node).map((p) => `${goSyntax(p.key)}:${goSyntax(p.value)}`);
    return `map[interface {}]interface {}{${parts.sort().join(', ')}}`;
  }
  const { kind } = node.typed;
  if (kind === 'nil') return 'interface {}(nil)';
  if (kind === 'string') return JSON.stringify(node.text);
  if (kind === 'uint64') return `0x${(node.typed.value as bigint).toString(16)}`;
  return goString(node);
}

/**
 * yaml.v2's refusal of a list or map used as a map key, anywhere in the document
 * (`yaml: invalid map key: []interface {}{1, 2}`), or `undefined` when there is none.
 */
export function invalidMapKey(node: GoNode, seen = new Set<GoNode>()): string | undefined {
  if (seen.has(node)) return undefined;
  seen.add(node);
  const children =
    node.kind === 'map'
      ? node.pairs.flatMap((p) => [p.key, p.value])
      : node.kind === 'seq'
        ? node.items
        : [];
  if (node.kind === 'map') {
    const bad = node.pairs.find((p) => p.key.kind !== 'scalar');
    if (bad !== undefined) return `yaml: invalid map key: ${goSyntax(bad.key)}`;
  }
  for (const c of children) {
    const found = invalidMapKey(c, seen);
    if (found !== undefined) return found;
  }
  return undefined;
}
