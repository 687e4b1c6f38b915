//! Chains of loops (issue 30, `docs/triggers.md` T2): a loop that runs
//! `--after` another forms an edge from it to its upstream, and an edge
//! that would close a cycle is refused at `create` and `edit`, naming the
//! loops on the cycle in order.

use std::collections::HashSet;

/// The cycle that giving `start` the upstreams `upstreams` would close
/// among `edges` (each `(loop, upstream)`: `loop` runs after `upstream`),
/// as the loops along it from `start` back to `start`: `["a", "b", "a"]`
/// for `a` after `b` after `a`. `None` when there is none.
///
/// `edges` are the other loops' edges as stored; `start`'s own stored
/// edges, which `upstreams` replace, must not be among them. The search
/// follows edges in the order given, so the cycle named is always the
/// same for the same input.
pub fn after_cycle<'a>(
    edges: &[(&'a str, &'a str)],
    start: &'a str,
    upstreams: &[&'a str],
) -> Option<Vec<&'a str>> {
    let mut seen = HashSet::new();
    for &upstream in upstreams {
        let mut path = vec![start];
        if reaches(edges, upstream, start, &mut seen, &mut path) {
            path.push(start);
            return Some(path);
        }
    }
    None
}

/// Whether `target` is reached from `at` by following edges to upstreams;
/// on success `path` holds the loops from `at` on, `target` excluded.
fn reaches<'a>(
    edges: &[(&'a str, &'a str)],
    at: &'a str,
    target: &str,
    seen: &mut HashSet<&'a str>,
    path: &mut Vec<&'a str>,
) -> bool {
    if at == target {
        return true;
    }
    // A loop already searched from reaches nothing new.
    if !seen.insert(at) {
        return false;
    }
    path.push(at);
    for &(from, upstream) in edges {
        if from == at && reaches(edges, upstream, target, seen, path) {
            return true;
        }
    }
    path.pop();
    false
}

/// `["a", "b", "a"]` as `a → b → a`, for the refusal's message.
pub fn cycle_text(cycle: &[&str]) -> String {
    cycle.join(" → ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_after_itself_is_a_cycle_of_one() {
        assert_eq!(after_cycle(&[], "a", &["a"]), Some(vec!["a", "a"]));
    }

    #[test]
    fn a_chain_without_a_way_back_is_no_cycle() {
        // c after b after a; a new loop d after c, and a after nothing.
        let edges = [("c", "b"), ("b", "a")];
        assert_eq!(after_cycle(&edges, "d", &["c"]), None);
        assert_eq!(after_cycle(&edges, "a", &[]), None);
        // A diamond is no cycle: d after b and c, both after a.
        let diamond = [("b", "a"), ("c", "a")];
        assert_eq!(after_cycle(&diamond, "d", &["b", "c"]), None);
    }

    #[test]
    fn the_cycle_is_named_from_the_loop_back_to_it() {
        // b after a, c after b: a after c closes a → c → b → a.
        let edges = [("b", "a"), ("c", "b")];
        assert_eq!(
            after_cycle(&edges, "a", &["c"]),
            Some(vec!["a", "c", "b", "a"])
        );
        assert_eq!(cycle_text(&["a", "c", "b", "a"]), "a → c → b → a");
    }

    #[test]
    fn the_first_upstream_that_closes_one_is_named() {
        // a after x is fine; a after b closes a → b → a.
        let edges = [("b", "a"), ("x", "y")];
        assert_eq!(
            after_cycle(&edges, "a", &["x", "b"]),
            Some(vec!["a", "b", "a"])
        );
    }

    #[test]
    fn a_dead_end_leaves_no_trace_in_the_path() {
        // From b the search first tries the dead end d, then c, which
        // leads back to a: the path names b and c only.
        let edges = [("b", "d"), ("b", "c"), ("c", "a"), ("d", "e")];
        assert_eq!(
            after_cycle(&edges, "a", &["b"]),
            Some(vec!["a", "b", "c", "a"])
        );
    }

    #[test]
    fn a_cycle_among_other_loops_is_not_this_loops() {
        // b and c already name each other (stored before the rule); a new
        // loop after b does not close a cycle through a, and the search
        // ends.
        let edges = [("b", "c"), ("c", "b")];
        assert_eq!(after_cycle(&edges, "a", &["b"]), None);
    }
}
