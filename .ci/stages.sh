# Stage timing for CI's scripts (.ci/run and .ci/rust-checks source this): each stage's wall
# time is printed as it ends and as a table at the end, because CI has a 90-minute limit (the
# goal is 45) and this says where the time goes. README, "Run the tests", keeps the figures.
#
#   source .ci/stages.sh; stage "lint"; ...; stage "tests"; ...; stages_report
# shellcheck shell=bash
ci_start=${ci_start:-$(date +%s)}
stage_start=$(date +%s)
stage_name=""
stage_table=""
stage_prefix="${stage_prefix:-}"

stage() {
    local now
    now=$(date +%s)
    if [ -n "$stage_name" ]; then
        stage_table+="$(printf '%6d s  %s' $((now - stage_start)) "$stage_name")"$'\n'
        echo "   (${stage_prefix}$stage_name: $((now - stage_start)) s; $((now - ci_start)) s since CI began)"
    fi
    stage_name="$1"
    stage_start=$now
    [ -n "$1" ] && echo "== ${stage_prefix}$1"
    return 0
}

stages_report() {
    stage ""
    echo "== ${stage_prefix}stage times ($(($(date +%s) - ci_start)) s since CI began)"
    printf '%s' "$stage_table"
}
