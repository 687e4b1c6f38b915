//! The OpenAPI document of `loops serve`, at `/api/v1/openapi.json`: each
//! operation names the command whose `--json` document it returns. The
//! black-box suite sends a request to every operation listed here, so the
//! list cannot name a route the server lacks.

use serde_json::{Map, Value, json};

/// One operation: method, path under `/api/v1`, the command it runs, what
/// it does, and its query parameters with what each means.
pub(super) struct Operation {
    method: &'static str,
    path: &'static str,
    command: &'static str,
    summary: &'static str,
    query: &'static [(&'static str, &'static str)],
}

const fn op(
    method: &'static str,
    path: &'static str,
    command: &'static str,
    summary: &'static str,
    query: &'static [(&'static str, &'static str)],
) -> Operation {
    Operation {
        method,
        path,
        command,
        summary,
        query,
    }
}

/// The operations, in the order the document lists them.
pub(super) const OPERATIONS: &[Operation] = &[
    op(
        "get",
        "/loops",
        "loops list",
        "List loops, a page at a time: a full page has a `Link` header to the next (rel=\"next\")",
        &[
            ("status", "only loops with this status"),
            ("limit", "at most N loops: 100 unless given, 1000 at most"),
            (
                "offset",
                "skip the first N loops (the next page: offset + limit)",
            ),
            ("label", "only loops with this label"),
        ],
    ),
    op(
        "get",
        "/loops/{loop}",
        "loops show",
        "Show one loop by id or name",
        &[],
    ),
    op(
        "patch",
        "/loops/{loop}",
        "loops edit",
        "Edit a loop: the JSON body's fields are the flags of loops edit in camelCase \
         (catchUp for --catch-up); a string or number is the value, a list repeats the flag, \
         true gives a switch",
        &[],
    ),
    op(
        "delete",
        "/loops/{loop}",
        "loops remove",
        "Remove a loop",
        &[("purge", "1 also deletes its run history")],
    ),
    op(
        "get",
        "/loops/{loop}/next",
        "loops next",
        "Its next fire times",
        &[("n", "how many (1 to 1000, default 5)")],
    ),
    op(
        "post",
        "/loops/{loop}/pause",
        "loops pause",
        "Pause a loop",
        &[],
    ),
    op(
        "post",
        "/loops/{loop}/resume",
        "loops resume",
        "Resume a loop",
        &[],
    ),
    op(
        "post",
        "/loops/{loop}/stop",
        "loops stop",
        "Stop a loop",
        &[],
    ),
    op(
        "post",
        "/loops/{loop}/run-now",
        "loops run-now",
        "Run a loop now and wait",
        &[],
    ),
    op(
        "post",
        "/loops/{loop}/trigger",
        "loops trigger",
        "Trigger a run: the JSON body is its payload, an Idempotency-Key header its key",
        &[],
    ),
    op(
        "post",
        "/apply",
        "loops apply",
        "Apply a loops file on the server's host: {path, dryRun, prune, yes, adopt, scope}",
        &[],
    ),
    op(
        "post",
        "/loops/{loop}/cancel",
        "loops cancel",
        "Cancel its running runs",
        &[],
    ),
    op(
        "post",
        "/loops/{loop}/labels/{action}",
        "loops labels",
        "Set, add, remove (action) or clear its labels",
        &[("labels", "the labels, comma-separated")],
    ),
    op(
        "get",
        "/runs",
        "loops runs",
        "List runs, newest first, a page at a time: a full page has a `Link` header to the \
         next (rel=\"next\")",
        &[
            ("loop", "only this loop's runs"),
            ("status", "only runs with this status"),
            ("limit", "at most N runs (default 50)"),
            (
                "offset",
                "skip the N newest runs (the next page: offset + limit)",
            ),
        ],
    ),
    op("get", "/runs/{run}", "loops runs", "Show one run", &[]),
    op(
        "get",
        "/runs/{run}/output",
        "loops runs --show-output",
        "Show one run with its output",
        &[
            ("showOutput", "must be 1: output is shown only on request"),
            (
                "follow",
                "1: server-sent events as loops logs -f follows: output events of lines, then \
                 an end event with the run",
            ),
        ],
    ),
    op(
        "get",
        "/workflows",
        "loops workflows list",
        "List workflows",
        &[
            ("status", "active (default) or archived"),
            ("limit", "at most N workflows"),
        ],
    ),
    op(
        "get",
        "/workflows/{workflow}",
        "loops workflows show",
        "Show one workflow with its steps",
        &[],
    ),
    op(
        "get",
        "/workflow-runs",
        "loops workflows runs",
        "List workflow runs, newest first",
        &[
            (
                "workflow",
                "only this workflow's runs (id, or name of an active one)",
            ),
            ("limit", "at most N runs (default 50)"),
        ],
    ),
    op(
        "get",
        "/workflow-runs/{run}",
        "loops workflows inspect",
        "Show a workflow run with its steps",
        &[],
    ),
    op(
        "get",
        "/daemons",
        "loops daemon status",
        "The daemon's status",
        &[],
    ),
    op("get", "/doctor", "loops doctor", "Check the setup", &[]),
    op(
        "get",
        "/events",
        "loops ui's refresh",
        "Server-sent events: a change event each time the store changed",
        &[],
    ),
];

/// The document.
pub(super) fn document() -> Value {
    let mut paths = Map::new();
    for o in OPERATIONS {
        let mut parameters: Vec<Value> = o
            .path
            .split('/')
            .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                json!({"name": name, "in": "path", "required": true,
                       "schema": {"type": "string"}})
            })
            .collect();
        parameters.extend(o.query.iter().map(|(name, what)| {
            json!({"name": name, "in": "query", "description": what,
                   "schema": {"type": "string"}})
        }));
        let operation = json!({
            "summary": o.summary,
            "description": format!("What `{} --json` prints.", o.command),
            "parameters": parameters,
            "responses": {
                "200": {"description": format!("the `{} --json` document", o.command),
                        "content": {"application/json": {}}},
                "default": {"description": "an error: 400, 401, 403, 404, 409, 421 or 500",
                            "content": {"application/json": {"schema":
                                {"$ref": "#/components/schemas/Error"}}}}
            }
        });
        if let Value::Object(entry) = paths
            .entry(o.path)
            .or_insert_with(|| Value::Object(Map::new()))
        {
            entry.insert(o.method.to_owned(), operation);
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "loops", "version": crate::args::VERSION},
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "the token in $LOOPS_DATA_DIR/serve.token"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": super::guard::COOKIE}
            },
            "schemas": {"Error": {
                "type": "object",
                "required": ["error"],
                "properties": {"error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": {"type": "string"},
                        "message": {"type": "string"}
                    }
                }}
            }}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_is_listed_once_with_its_path_parameters() {
        let doc = document();
        let count: usize = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .map(|p| p.as_object().unwrap().len())
            .sum();
        assert_eq!(count, OPERATIONS.len());
        let pause = &doc["paths"]["/loops/{loop}/pause"]["post"];
        assert_eq!(pause["parameters"][0]["name"], "loop");
    }
}
