#!/usr/bin/env node
'use strict';
// Runs the compiled CLI (npm run build produces dist/).
const { runCli } = require('../dist/client/cli.js');
runCli(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
