"""``finality completion bash|zsh|fish``: a shell completion script, made from the parser.

The commands and their flags are read from the very parser ``finality`` runs with, so the
completion can never offer a command that does not exist or miss a new one::

    source <(finality completion bash)                       # ~/.bashrc
    finality completion zsh > "${fpath[1]}/_finality"        # zsh
    finality completion fish > ~/.config/fish/completions/finality.fish
"""

from __future__ import annotations

import argparse
import shlex

from watcher.cli.common import EX_OK, Commands, Query

SHELLS = ("bash", "zsh", "fish")


def command_flags(parser: argparse.ArgumentParser) -> dict[str, tuple[str, list[str]]]:
    """``command → (help, flags)`` of every subcommand of ``parser``, in its order."""
    found: dict[str, tuple[str, list[str]]] = {}
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            flags = [f for a in sub._actions for f in a.option_strings if f.startswith("--")]
            found[name] = (helps.get(name, ""), flags)
    return found


def bash_script(commands: dict[str, tuple[str, list[str]]]) -> str:
    """Bash: the command first, then that command's flags (files for anything else)."""
    cases = "".join(
        f"        {name}) opts={shlex.quote(' '.join(flags))} ;;\n"
        for name, (_, flags) in commands.items()
    )
    return (
        "# bash completion for finality (finality completion bash)\n"
        "_finality() {\n"
        '    local cur="${COMP_WORDS[COMP_CWORD]}" opts=""\n'
        '    if [ "$COMP_CWORD" -eq 1 ]; then\n'
        f'        COMPREPLY=($(compgen -W {shlex.quote(" ".join(commands))} -- "$cur"))\n'
        "        return\n"
        "    fi\n"
        '    case "${COMP_WORDS[1]}" in\n'
        f"{cases}"
        "    esac\n"
        '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))\n'
        "}\n"
        "complete -o default -F _finality finality\n"
    )


def zsh_script(commands: dict[str, tuple[str, list[str]]]) -> str:
    """Zsh: described commands, then the command's flags (files otherwise)."""
    described = "".join(
        f"    {shlex.quote(name + ':' + help_.replace(':', ' '))}\n"
        for name, (help_, _) in commands.items()
    )
    cases = "".join(
        f"        {name}) compadd -- {' '.join(flags)} ;;\n"
        for name, (_, flags) in commands.items()
        if flags
    )
    return (
        "#compdef finality\n"
        "# zsh completion for finality (finality completion zsh)\n"
        "_finality() {\n"
        "  local -a commands\n"
        f"  commands=(\n{described}  )\n"
        "  if (( CURRENT == 2 )); then\n"
        "    _describe 'command' commands\n"
        "    return\n"
        "  fi\n"
        '  if [[ "$PREFIX" == -* ]]; then\n'
        "    case $words[2] in\n"
        f"{cases}"
        "    esac\n"
        "  else\n"
        "    _files\n"
        "  fi\n"
        "}\n"
        "compdef _finality finality\n"
    )


def fish_script(commands: dict[str, tuple[str, list[str]]]) -> str:
    """Fish: a ``complete`` line per command and per flag of each command."""
    lines = ["# fish completion for finality (finality completion fish)"]
    for name, (help_, flags) in commands.items():
        lines.append(
            f"complete -c finality -f -n __fish_use_subcommand -a {name} -d {shlex.quote(help_)}"
        )
        lines += [
            f"complete -c finality -n '__fish_seen_subcommand_from {name}' -l {flag[2:]}"
            for flag in flags
        ]
    return "\n".join(lines) + "\n"


SCRIPTS = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}


def cmd_completion(args: argparse.Namespace) -> int:
    """``finality completion SHELL``: the script on stdout."""
    print(SCRIPTS[args.shell](command_flags(args.root_parser)), end="")
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``completion`` (the root parser arrives as ``args.root_parser``)."""
    completion = sub.add_parser("completion", help="print a shell completion script")
    completion.add_argument("shell", choices=SHELLS)
    commands["completion"] = cmd_completion
