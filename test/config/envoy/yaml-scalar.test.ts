import { describe, expect, it } from 'vitest';
import { goFloat, typeScalar } from '../../../src/config/envoy/yaml-scalar.js';

describe('typeScalar: plain scalars typed as yaml.v2 (YAML 1.1) types them', () => {
  it.each([
    ['', '!!null', null],
    ['~', '!!null', null],
    ['NULL', '!!null', null],
    ['yes', '!!bool', true],
    ['Off', '!!bool', false],
    ['y', '!!bool', true],
    ['42', '!!int', 42n],
    ['-7', '!!int', -7n],
    ['0x1F', '!!int', 31n],
    ['0o17', '!!int', 15n],
    ['017', '!!int', 15n],
    ['0b101', '!!int', 5n],
    ['1_000', '!!int', 1000n],
    ['18446744073709551615', '!!int', 18446744073709551615n],
    ['08', '!!float', 8],
    ['2.5', '!!float', 2.5],
    ['.5', '!!float', 0.5],
    ['1e3', '!!float', 1000],
    ['.inf', '!!float', Infinity],
    ['-.INF', '!!float', -Infinity],
    ['1e400', '!!str', '1e400'],
    ['2024-01-02', '!!timestamp', '2024-01-02'],
    ['2024-02-30', '!!str', '2024-02-30'],
    ['2024-1-2T3:4:5Z', '!!timestamp', '2024-1-2T3:4:5Z'],
    ['<<', '!!merge', '<<'],
    ['second', '!!str', 'second'],
    ['+', '!!str', '+'],
  ])('%j is %s', (text, tag, value) => {
    const t = typeScalar(text, undefined, true);
    expect(t).toMatchObject({ tag, value });
  });

  it('quoted and block scalars are strings', () => {
    expect(typeScalar('42', undefined, false)).toEqual({
      tag: '!!str',
      kind: 'string',
      value: '42',
    });
  });

  it('honours explicit tags and refuses text that does not fit them', () => {
    expect(typeScalar('42', 'tag:yaml.org,2002:str', true)).toMatchObject({
      tag: '!!str',
      value: '42',
    });
    expect(typeScalar('42', '!!float', true)).toMatchObject({ tag: '!!float', value: 42 });
    expect(typeScalar('abc', '!!int', true)).toEqual({
      error: 'cannot decode !!str `abc` as a !!int',
    });
    expect(typeScalar('x', '!custom', true)).toMatchObject({ tag: '!custom', kind: 'string' });
  });

  it('types ints beyond int64 as uint64', () => {
    expect(typeScalar('9223372036854775808', undefined, true)).toMatchObject({ kind: 'uint64' });
    expect(typeScalar('9223372036854775807', undefined, true)).toMatchObject({ kind: 'int' });
  });
});

describe('goFloat prints as Go’s %v', () => {
  it.each([
    [0.25, '0.25'],
    [100000, '100000'],
    [1e6, '1e+06'],
    [1234567, '1.234567e+06'],
    [0.0001, '0.0001'],
    [0.00001, '1e-05'],
    [-2.5, '-2.5'],
    [0, '0'],
    [NaN, 'NaN'],
    [Infinity, '+Inf'],
    [-Infinity, '-Inf'],
  ])('%d → %s', (x, text) => {
    expect(goFloat(x)).toBe(text);
  });
});
