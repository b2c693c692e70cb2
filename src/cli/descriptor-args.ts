import type { DescriptorEntry } from '../core/descriptor.js';

/** Parses `key=value` command-line arguments into descriptor entries, in order. */
export function parseDescriptorArgs(args: readonly string[]): DescriptorEntry[] {
  return args.map((arg) => {
    const eq = arg.indexOf('=');
    if (eq <= 0) throw new Error(`descriptor entry "${arg}" must look like key=value`);
    return { key: arg.slice(0, eq), value: arg.slice(eq + 1) };
  });
}
