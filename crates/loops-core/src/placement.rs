//! Placement (issue 30, `docs/triggers.md` P1–P7): which runners may run a
//! loop. A runner carries labels, always including `host:<hostname>`; a
//! loop's `runsOn` labels must all be among them.

/// The label of a runner that may run every loop wherever it is placed
/// (`tick --anywhere`, P6). No loop can be placed on it: a label never
/// holds `*`.
pub const ANY_PLACEMENT: &str = "*";

/// The label every runner on `hostname` carries (P1).
pub fn host_label(hostname: &str) -> String {
    format!("host:{hostname}")
}

/// Whether a runner with `labels` may run a loop placed on `runs_on`
/// (P4): every label of `runs_on` is one of `labels`. A loop placed
/// nowhere runs anywhere, and a runner carrying [`ANY_PLACEMENT`] runs
/// every loop.
pub fn placement_matches(runs_on: &[String], labels: &[String]) -> bool {
    labels.iter().any(|l| l == ANY_PLACEMENT) || runs_on.iter().all(|l| labels.contains(l))
}

/// The labels of `runs_on` that `labels` lack, in order, for a refusal's
/// message (P6).
pub fn missing_labels<'a>(runs_on: &'a [String], labels: &[String]) -> Vec<&'a str> {
    runs_on
        .iter()
        .filter(|l| !labels.contains(l))
        .map(String::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(labels: &[&str]) -> Vec<String> {
        labels.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_loop_placed_nowhere_runs_anywhere() {
        assert!(placement_matches(&[], &[]));
        assert!(placement_matches(&[], &v(&["host:a"])));
    }

    #[test]
    fn every_label_must_match() {
        let runner = v(&["host:a", "gpu"]);
        assert!(placement_matches(&v(&["gpu"]), &runner));
        assert!(placement_matches(&v(&["host:a", "gpu"]), &runner));
        assert!(!placement_matches(&v(&["host:a", "arm"]), &runner));
        assert!(!placement_matches(&v(&["host:b"]), &runner));
        assert_eq!(
            missing_labels(&v(&["host:a", "arm", "x"]), &runner),
            ["arm", "x"]
        );
        assert!(missing_labels(&v(&["gpu"]), &runner).is_empty());
    }

    #[test]
    fn a_runner_anywhere_runs_every_loop() {
        assert!(placement_matches(
            &v(&["host:b", "arm"]),
            &v(&["host:a", ANY_PLACEMENT])
        ));
        assert!(!placement_matches(&v(&["host:b"]), &v(&["host:a", "**"])));
    }

    #[test]
    fn the_host_label_names_the_host() {
        assert_eq!(host_label("box-1.lan"), "host:box-1.lan");
    }
}
