/**
 * The public API reports (api/*.api.md), one per package entry, made by
 * @microsoft/api-extractor from the built declarations (dist/). `npm run api:check`
 * (in `pretest`) fails when the public surface differs from the report kept in the
 * repository; `npm run api:update` rewrites the reports, to commit with the change.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';

const root = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
  exports: Record<string, string | { types?: string }>;
};
const update = process.argv.includes('--update');

/** `sluice`, `sluice-redis`, ...: one report per entry of the exports map with types. */
const entries = Object.entries(pkg.exports).flatMap(([subpath, target]) =>
  typeof target === 'object' && target.types !== undefined
    ? [{ name: subpath === '.' ? 'sluice' : `sluice-${subpath.slice(2)}`, types: target.types }]
    : [],
);

let failed = 0;
for (const { name, types } of entries) {
  const config = ExtractorConfig.prepare({
    configObject: {
      projectFolder: root,
      mainEntryPointFilePath: `<projectFolder>/${types.replace(/^\.\//, '')}`,
      compiler: { tsconfigFilePath: '<projectFolder>/tsconfig.build.json' },
      apiReport: {
        enabled: true,
        reportFileName: `${name}.api.md`,
        reportFolder: '<projectFolder>/api/',
        reportTempFolder: '<projectFolder>/node_modules/.api-extractor/',
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        // The report is the point; TSDoc style and missing release tags are not checked here.
        extractorMessageReporting: {
          default: { logLevel: 'none' },
          'ae-missing-release-tag': { logLevel: 'none' },
        },
        tsdocMessageReporting: { default: { logLevel: 'none' } },
        compilerMessageReporting: { default: { logLevel: 'warning' } },
      },
    },
    configObjectFullPath: undefined,
    packageJsonFullPath: `${root}package.json`,
  });
  const result = Extractor.invoke(config, { localBuild: update, showVerboseMessages: false });
  if (result.apiReportChanged && !update) {
    failed++;
    console.error(
      `api/${name}.api.md: the public API of ${types} changed; run npm run api:update and commit the report`,
    );
  } else if (!result.succeeded) {
    failed++;
    console.error(`api/${name}.api.md: api-extractor failed (${result.errorCount} errors)`);
  }
}
if (failed > 0) process.exit(1);
console.log(`${entries.length} API reports ${update ? 'written' : 'match'} (api/)`);
