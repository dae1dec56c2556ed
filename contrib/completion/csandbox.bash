# bash completion for csandbox: commands, their flags, profile names and image names.
# Installed as share/bash-completion/completions/csandbox.

_csandbox_profiles()
{
        local base=${CLAUDE_PROFILE_PROFILES_BASE:-$HOME/.claude-profiles} d
        for d in "$base"/*/; do
                [ -d "$d" ] && printf '%s\n' "$(basename "$d")"
        done
}

_csandbox_images()
{
        "${COMP_WORDS[0]}" image ls 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_csandbox()
{
        local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
        local cmd=${COMP_WORDS[1]} words
        COMPREPLY=()
        if [ "$COMP_CWORD" -eq 1 ]; then
                words="run plan exec image add list sandbox sandbox-cache doctor egress-log podman docker help version"
                COMPREPLY=($(compgen -W "$words" -- "$cur"))
                return
        fi
        case $cmd in
        run | plan)
                case $prev in
                --image) COMPREPLY=($(compgen -W "$(_csandbox_images)" -- "$cur")); return ;;
                esac
                if [[ $cur == -* ]]; then
                        words="--sandbox --host --image --accept-changes --tty=auto --tty=pty --tty=inherit
                               --proc=auto --proc=fresh --proc=bind --proc=none --help"
                        COMPREPLY=($(compgen -W "$words" -- "$cur"))
                else
                        COMPREPLY=($(compgen -W "$(_csandbox_profiles)" -- "$cur"))
                fi
                ;;
        egress-log | sandbox-cache | doctor)
                [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "$(_csandbox_profiles)" -- "$cur"))
                ;;
        sandbox)
                if [ "$COMP_CWORD" -eq 2 ]; then
                        COMPREPLY=($(compgen -W "$(_csandbox_profiles)" -- "$cur"))
                else
                        COMPREPLY=($(compgen -W "--on --off" -- "$cur"))
                fi
                ;;
        image)
                if [ "$COMP_CWORD" -eq 2 ]; then
                        COMPREPLY=($(compgen -W "import pull build ls inspect rm prune" -- "$cur"))
                        return
                fi
                case ${COMP_WORDS[2]} in
                inspect | rm) COMPREPLY=($(compgen -W "$(_csandbox_images)" -- "$cur")) ;;
                import | build) COMPREPLY=($(compgen -f -- "$cur")) ;;
                esac
                ;;
        podman | docker)
                if [ "$COMP_CWORD" -eq 2 ]; then
                        words="run ps logs stop kill wait rm exec pull build images rmi inspect tag save load volume info version"
                        COMPREPLY=($(compgen -W "$words" -- "$cur"))
                        return
                fi
                case ${COMP_WORDS[2]} in
                run | rmi | inspect | tag) COMPREPLY=($(compgen -W "$(_csandbox_images)" -- "$cur")) ;;
                build) COMPREPLY=($(compgen -f -- "$cur")) ;;
                esac
                ;;
        add)
                COMPREPLY=($(compgen -W "--sandbox --link --isolate --help" -- "$cur"))
                ;;
        help)
                COMPREPLY=($(compgen -W "run plan exec image add list sandbox sandbox-cache doctor egress-log podman docker" -- "$cur"))
                ;;
        exec)
                case $prev in
                --rootfs | --bind | --ro-bind | --bind-try | --ro-bind-try | --dev-bind | \
                        --dev-bind-try | --file | --env-file | --seccomp | --chdir | \
                        --egress-file | --egress-log)
                        COMPREPLY=($(compgen -f -- "$cur")); return ;;
                --image) COMPREPLY=($(compgen -W "$(_csandbox_images)" -- "$cur")); return ;;
                --net) COMPREPLY=($(compgen -W "none pasta host" -- "$cur")); return ;;
                --egress) COMPREPLY=($(compgen -W "open allowlist none" -- "$cur")); return ;;
                esac
                if [[ $cur == -* ]]; then
                        words="--rootfs --image --writable --bind --ro-bind --bind-try
                               --ro-bind-try --dev-bind --dev-bind-try --tmpfs --dir --symlink
                               --file --uid --gid --map-range --package-broker --hostname --net
                               --map-host-loopback --chdir --setenv --unsetenv --env-file
                               --env-fd --seccomp --tty=auto --tty=pty --tty=inherit
                               --proc=auto --proc=fresh --proc=bind --proc=none --memory
                               --cpus --egress --allow-host --deny-host --egress-file --egress-log
                               --plan --help"
                        COMPREPLY=($(compgen -W "$words" -- "$cur"))
                else
                        COMPREPLY=($(compgen -c -- "$cur"))
                fi
                ;;
        esac
}
complete -F _csandbox csandbox
