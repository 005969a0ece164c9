# The catalog-rebuild worker. Built by docker-compose.yml (`build: .`); also usable on its own:
#   docker build -t catalog-rebuild .
#   docker run -e TEMPORAL_ADDRESS=temporal:7233 -e CATALOG_REBUILD_CONFIG=/config/config.json \
#     -v "$PWD/config.json:/config/config.json:ro" catalog-rebuild

# Stage 1: the product build (tsconfig.build.json: workflows, activities, worker, client, lib; no
# development tooling or tests) and the prebuilt workflow bundle, dist/workflow-bundle.js.
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would build before the sources are here; the build runs below.
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY workflows ./workflows
COPY activities ./activities
COPY worker ./worker
COPY client ./client
COPY lib ./lib
RUN npx tsc -p tsconfig.build.json && node dist/worker/build-bundle.js

# Stage 2: what the worker and the CLI need at run time: production dependencies, the compiled
# product with its workflow bundle, the migrations and the CLI entry (no sources, no dev tooling).
FROM node:20-slim
WORKDIR /app
RUN chown node:node /app
USER node
COPY --chown=node:node package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts
COPY --chown=node:node --from=build /app/dist ./dist
COPY --chown=node:node bin ./bin
COPY --chown=node:node migrations ./migrations

# glibc's malloc keeps up to 8 arenas per core for the worker's threads (libuv, the Temporal core);
# two hold its memory lower: peak RSS 252 MB against 303–312 MB at 10^7 jobs (docs/performance.md).
ENV MALLOC_ARENA_MAX=2

# Graceful shutdown on SIGTERM: in-flight pages finish within the shutdown grace time or are retried
# on another worker.
STOPSIGNAL SIGTERM
CMD ["node", "dist/worker/main.js"]
