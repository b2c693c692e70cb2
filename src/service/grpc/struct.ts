import type { JsonValue } from '../../protocol/messages.js';
import type { WireStruct, WireValue } from '../../protocol/wire.js';

/** Converts a JSON value to a `google.protobuf.Value` (undefined properties are dropped). */
export function toWireValue(v: JsonValue): WireValue {
  if (v === null) return { nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toWireValue) } };
  return { structValue: toWireStruct(v as Readonly<Record<string, JsonValue>>) };
}

/** Converts a JSON object to a `google.protobuf.Struct`. */
export function toWireStruct(o: Readonly<Record<string, JsonValue>>): WireStruct {
  const fields: Record<string, WireValue> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) fields[k] = toWireValue(v);
  return { fields };
}
