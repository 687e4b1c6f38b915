//! Tests of the workflow file's number reading and cycle search.

use super::*;

#[test]
fn whole_numbers() {
    let n = |v: Value| match v {
        Value::Number(n) => whole_number(&n),
        _ => None,
    };
    assert_eq!(n(serde_json::json!(0)), Some(0));
    assert_eq!(n(serde_json::json!(u64::MAX)), Some(u64::MAX));
    assert_eq!(n(serde_json::json!(2.0)), Some(2));
    assert_eq!(
        n(serde_json::json!(9_007_199_254_740_991.0)),
        Some(9_007_199_254_740_991)
    );
    assert_eq!(n(serde_json::json!(1e300)), None);
    assert_eq!(n(serde_json::json!(-1)), None);
    assert_eq!(n(serde_json::json!(-0.5)), None);
    assert_eq!(n(serde_json::json!(0.5)), None);
}

#[test]
fn cycles_are_found_from_the_first_step_seen_twice() {
    assert_eq!(find_cycle(&[]), None);
    assert_eq!(find_cycle(&[vec![1], vec![2], vec![]]), None);
    assert_eq!(
        find_cycle(&[vec![1], vec![2], vec![1]]),
        Some(vec![1, 2, 1])
    );
    assert_eq!(
        find_cycle(&[vec![], vec![0, 2], vec![3], vec![1]]),
        Some(vec![1, 2, 3, 1])
    );
    // Out-of-range edges cannot come from validated input; they are ignored.
    assert_eq!(find_cycle(&[vec![7]]), None);
}
