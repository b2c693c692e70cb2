import fc from 'fast-check';
import { propertySeed } from './property-seed.js';

// Every fc.assert of the suite runs on propertySeed(), also those that name no seed.
const seed = propertySeed();
fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });
if (process.env['SLUICE_PROPERTY_SEED'] === 'random') {
  console.log(`fast-check seed ${seed} (replay: SLUICE_PROPERTY_SEED=${seed})`);
}
