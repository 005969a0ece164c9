/** Build step (`npm run build`): writes the workflow bundle `dist/workflow-bundle.js` that workers load. */
import { writeWorkflowBundle } from './bundle';

async function main(): Promise<void> {
  const { file, bytes } = await writeWorkflowBundle();
  console.log(`workflow bundle: ${file} (${Math.round(bytes / 1024)} KiB)`);
}

main().catch((err) => {
  console.error(`build-bundle: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
