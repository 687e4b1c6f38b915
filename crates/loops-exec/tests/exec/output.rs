//! Output capture: drained to EOF, bounded by bytes keeping the tail,
//! decoded once (SPEC §5.7 "Capture"; §10 item 70; §9 items 22–24).

use loops_core::ExecutorStatus;

use crate::support::*;

#[test]
fn output_over_the_cap_keeps_the_tail_with_the_total_dropped() {
    // SPEC §10 item 70: 300003 bytes against the 262144-byte default cap.
    let fx = Fixture::new();
    let r = run(
        &shell(r"head -c 300000 /dev/zero | tr '\0' a; printf END"),
        &fx.opts(),
    );
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{}", r.stderr);
    let expected = format!("[truncated 37859 bytes]\n{}END", "a".repeat(262_141));
    assert!(
        r.stdout == expected,
        "got {} bytes: {:?}…",
        r.stdout.len(),
        &r.stdout[..40]
    );
}

#[test]
fn a_cut_never_splits_a_character() {
    // SPEC §9 item 23. "aéééé" is 9 bytes; a 5-byte cap cuts inside an "é".
    let fx = Fixture::new();
    let mut opts = fx.opts();
    opts.max_output_bytes = 5;
    let r = run(&shell(r"printf 'a\303\251\303\251\303\251\303\251'"), &opts);
    assert_eq!(r.stdout, "[truncated 5 bytes]\néé");
}

#[test]
fn a_character_split_across_writes_decodes_whole() {
    // SPEC §9 item 23: the two bytes of "é" arrive in separate reads.
    let fx = Fixture::new();
    let r = run(
        &shell(
            r"printf '\303'; sleep 0.1; printf '\251\n'; printf '\342\202' >&2; sleep 0.1; printf '\254' >&2",
        ),
        &fx.opts(),
    );
    assert_eq!(r.stdout, "é\n");
    assert_eq!(r.stderr, "€");
}

#[test]
fn output_written_just_before_exit_is_kept() {
    // SPEC §9 item 24: completion waits for EOF, not only for the exit.
    let fx = Fixture::new();
    let r = run(
        &shell(r"head -c 200000 /dev/zero | tr '\0' b; exit 0"),
        &fx.opts(),
    );
    assert_eq!(r.stdout.len(), 200_000);
    let r = run(&shell("( sleep 0.1; echo tail ) & echo head"), &fx.opts());
    assert_eq!(r.stdout, "head\ntail\n");
}

#[test]
fn stdout_and_stderr_are_read_concurrently() {
    // A child that fills the stderr pipe before writing stdout would block
    // forever if the streams were read one after the other.
    let fx = Fixture::new();
    let r = run(
        &with_timeout(
            shell(r"head -c 200000 /dev/zero | tr '\0' e >&2; echo out"),
            10_000,
        ),
        &fx.opts(),
    );
    assert_eq!(r.status, ExecutorStatus::Succeeded);
    assert_eq!(r.stdout, "out\n");
    assert_eq!(r.stderr.len(), 200_000);
}

#[test]
fn invalid_utf8_is_replaced_not_fatal() {
    let fx = Fixture::new();
    let r = run(&shell(r"printf 'ok\377\n'"), &fx.opts());
    assert_eq!(r.stdout, "ok\u{fffd}\n");
}
