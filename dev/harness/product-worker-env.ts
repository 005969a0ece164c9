/**
 * The environment of the product's worker as `npm run worker` and the Dockerfile run it:
 * `MALLOC_ARENA_MAX=2` unless `env` sets it (README, "Worker"). Used by the demo's, the harness's
 * and the bench's product workers, and by the bench's report of them.
 */
export function productWorkerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...env, MALLOC_ARENA_MAX: env.MALLOC_ARENA_MAX ?? '2' };
}
