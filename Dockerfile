# The catalog-rebuild worker. Built by docker-compose.yml (`build: .`); also usable on its own:
#   docker build -t catalog-rebuild .
#   docker run -e TEMPORAL_ADDRESS=temporal:7233 -e CATALOG_REBUILD_CONFIG=/config/config.json \
#     -v "$PWD/config.json:/config/config.json:ro" catalog-rebuild
FROM node:20-slim

WORKDIR /app
RUN chown node:node /app
USER node

# Dependencies first, so source edits do not reinstall them. Dev dependencies stay: `npm run worker`
# compiles with TypeScript before it starts.
COPY --chown=node:node package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

# Only what the build and the worker need (no host node_modules, .tools or .data).
COPY --chown=node:node tsconfig.json ./
COPY --chown=node:node bin ./bin
COPY --chown=node:node migrations ./migrations
COPY --chown=node:node workflows ./workflows
COPY --chown=node:node activities ./activities
COPY --chown=node:node worker ./worker
COPY --chown=node:node client ./client
COPY --chown=node:node lib ./lib
COPY --chown=node:node scripts ./scripts
COPY --chown=node:node test ./test
RUN npm run build

# Graceful shutdown on SIGTERM: in-flight pages finish within the shutdown grace time or are retried
# on another worker.
STOPSIGNAL SIGTERM
CMD ["node", "dist/worker/main.js"]
