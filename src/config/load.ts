import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { parseDocument } from 'yaml';
import { PolicyError } from '../core/errors.js';
import { parsePolicyDocument, type PolicySet } from './policies.js';

/**
 * Parses policy file text. JSON when `file` ends in `.json`, YAML otherwise (YAML is a
 * superset of JSON). Syntax errors are `SLUICE_ERR_CONFIG_PARSE` with line and column.
 */
export function parsePolicyText(text: string, file: string): PolicySet {
  let doc: unknown;
  if (extname(file).toLowerCase() === '.json') {
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
    doc = parsed.toJS();
  }
  return parsePolicyDocument(doc, file);
}

/** Reads and validates a policy file (YAML or JSON). */
export async function loadPolicyFile(file: string): Promise<PolicySet> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (cause) {
    const message = `cannot read policy file: ${(cause as NodeJS.ErrnoException).code ?? (cause as Error).message}`;
    throw new PolicyError('SLUICE_ERR_CONFIG_READ', `${file}: ${message}`, {
      cause,
      issues: [{ file, path: '', message }],
    });
  }
  return parsePolicyText(text, file);
}
