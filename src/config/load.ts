import { extname } from 'node:path';
import { parseDocument } from 'yaml';
import { PolicyError } from '../core/errors.js';
import { parsePolicyDocument, type PolicySet } from './policies.js';
import { EMPTY_FILE, readConfigFile } from './read-file.js';

/**
 * Parses policy file text. JSON when `file` ends in `.json`, YAML otherwise (YAML is a
 * superset of JSON). Syntax errors are `SLUICE_ERR_CONFIG_PARSE` with line and column.
 */
export function parsePolicyText(text: string, file: string): PolicySet {
  let doc: unknown;
  const empty = (): never => {
    throw new PolicyError('SLUICE_ERR_CONFIG_INVALID', `${file}: ${EMPTY_FILE}`, {
      issues: [{ file, path: '', message: EMPTY_FILE }],
    });
  };
  if (extname(file).toLowerCase() === '.json') {
    if (text.trim() === '') empty();
    try {
      doc = JSON.parse(text);
    } catch (cause) {
      throw new PolicyError(
        'SLUICE_ERR_CONFIG_PARSE',
        `${file}: not valid JSON: ${(cause as Error).message}`,
        {
          cause,
          issues: [{ file, path: '', message: `not valid JSON: ${(cause as Error).message}` }],
        },
      );
    }
  } else {
    const parsed = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
    if (parsed.errors.length > 0) {
      const issues = parsed.errors.map((e) => ({
        file,
        path: '',
        message: `not valid YAML: ${e.message.split('\n')[0]}`,
      }));
      throw new PolicyError(
        'SLUICE_ERR_CONFIG_PARSE',
        issues.map((i) => `${file}: ${i.message}`).join('\n'),
        {
          cause: parsed.errors[0],
          issues,
        },
      );
    }
    if (parsed.contents === null) empty();
    doc = parsed.toJS();
  }
  return parsePolicyDocument(doc, file);
}

/**
 * Reads and validates a policy file (YAML or JSON). A file that cannot be read is
 * `SLUICE_ERR_CONFIG_READ` naming the file and the problem (`cannot read: symlink loop
 * (ELOOP)`); an empty one, or envoyproxy/ratelimit config, is refused saying so.
 */
export async function loadPolicyFile(file: string): Promise<PolicySet> {
  return parsePolicyText(await readConfigFile(file), file);
}
