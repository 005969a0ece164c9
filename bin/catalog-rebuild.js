#!/usr/bin/env node
'use strict';
// Runs the compiled CLI (npm run build produces dist/).
const { runCli, endProcess, quietOnClosedPipe, rawArgv } = require('../dist/client/cli.js');

quietOnClosedPipe();
runCli(process.argv.slice(2), undefined, undefined, rawArgv()).then(
  (code) => endProcess(code),
  (err) => {
    console.error(err);
    endProcess(1);
  },
);
