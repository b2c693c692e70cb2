/**
 * The layers of src/ (docs/design.md), checked by `npm run layers` (and so by `npm test`).
 * A module may import its own layer and the layers below it, never one above it, and
 * never a sibling on its own rank (the stages do not know each other). No exceptions
 * are listed: a violation is fixed in the code.
 *
 * Ranks, lowest first. `entry` is the public entry files, src/*.ts.
 */
const ranks = [
  ['core'],
  ['algorithms', 'protocol'], // protocol: the protos, wire types and status mapping
  ['config', 'stores', 'client'], // client: the gRPC client, on protocol only
  ['metrics'],
  ['limiter'],
  ['local', 'quota', 'overload', 'capacity'], // the stages, and the capacity planner
  ['service', 'http'],
  ['cli'],
  ['entry'],
];

/** The path pattern of one layer. */
const pathOf = (layer) => (layer === 'entry' ? '^src/[^/]+\\.ts$' : `^src/${layer}/`);

/** One rule per layer: it may not import any layer not below it (but itself). */
const layerRules = ranks.flatMap((layers, rank) =>
  layers.flatMap((layer) => {
    const allowed = new Set([layer, ...ranks.slice(0, rank).flat()]);
    const forbidden = ranks.flat().filter((l) => !allowed.has(l));
    // The top layer may import everything; an empty `to.path` would match everything.
    if (forbidden.length === 0) return [];
    return {
      name: `layer-${layer}`,
      comment: `${layer} imports only ${[...allowed].join(', ')} (docs/design.md)`,
      severity: 'error',
      from: { path: pathOf(layer) },
      to: { path: forbidden.map(pathOf) },
    };
  }),
);

/** The protocol module sits below client, quota and service and imports only core. */
const protocolRule = {
  name: 'protocol-imports-only-core',
  comment: 'src/protocol imports only src/core and packages',
  severity: 'error',
  from: { path: '^src/protocol/' },
  to: { path: '^src/', pathNot: ['^src/protocol/', '^src/core/'] },
};

export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'no import cycles, type-only imports included',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    protocolRule,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a type from an upper layer is an upward dependency too.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
