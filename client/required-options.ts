/**
 * Required options checked after unknown options. Commander checks a command's required options
 * before its unknown ones, so a mistyped required option (`status --catalg demo`) was reported as
 * the option missing (`required option '--catalog <name>' not specified`), not as the typo. Here
 * each required option is checked in a `preAction` hook instead, which commander runs after its
 * unknown-option check: the typo is named first (`unknown option '--catalg'`, with commander's
 * "Did you mean --catalog?"), and a required option that is really missing gets commander's own
 * message and error code (`commander.missingMandatoryOptionValue`, exit 2; UNKNOWN for `check`).
 */
import type { Command, Option } from 'commander';

/**
 * Moves the required-option check of `program`'s commands and subcommands (recursively) behind
 * their unknown-option check. Call it once, after every command and option is defined.
 */
export function checkUnknownOptionsFirst(program: Command): void {
  for (const cmd of program.commands) {
    const required: Option[] = cmd.options.filter((o) => o.mandatory);
    if (required.length) {
      for (const o of required) o.mandatory = false;
      cmd.hook('preAction', (self) => {
        for (const o of required) {
          if (self.getOptionValue(o.attributeName()) === undefined)
            self.error(`error: required option '${o.flags}' not specified`, {
              code: 'commander.missingMandatoryOptionValue',
            });
        }
      });
    }
    checkUnknownOptionsFirst(cmd);
  }
}
