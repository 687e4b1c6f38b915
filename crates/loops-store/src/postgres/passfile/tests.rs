//! The password file: libpq's format, the file refused unless private,
//! and the `passfile` parameter taken out of the connection string.

use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::postgres::DatabaseUrl;

const FILE: &str = "\
# a comment:*:*:*:nope
db.example:5432:loops:app:first
db.example:5432:loops:app:second
*:6000:*:*:any-host
with\\:colon:5432:*:*:p\\:a\\\\ss:tail
short:5432:loops
/tmp:5432:*:*:socket
";

#[test]
fn lines_match_with_wildcards_escapes_and_the_first_wins() {
    let find = |host, port, db, user| lookup(FILE, host, port, db, user);
    assert_eq!(
        find("db.example", 5432, "loops", "app").as_deref(),
        Some("first")
    );
    assert_eq!(find("db.example", 5432, "loops", "other"), None);
    assert_eq!(
        find("anywhere", 6000, "x", "y").as_deref(),
        Some("any-host")
    );
    // `\:` and `\\` in any field; colons after the fourth are the password's.
    assert_eq!(
        find("with:colon", 5432, "d", "u").as_deref(),
        Some("p:a\\ss:tail")
    );
    // A line of fewer than five fields matches nothing; a comment neither.
    assert_eq!(find("short", 5432, "loops", "u"), None);
    assert_eq!(find("# a comment", 5432, "x", "y"), None);
    // A default socket directory is also `localhost`, and itself.
    assert_eq!(
        lookup("localhost:*:*:*:l\n", "/tmp", 5432, "d", "u").as_deref(),
        Some("l")
    );
    assert_eq!(find("/tmp", 5432, "d", "u").as_deref(), Some("socket"));
    assert_eq!(
        lookup("localhost:*:*:*:l\n", "/srv/sock", 5432, "d", "u"),
        None
    );
    // CRLF line ends.
    assert_eq!(
        lookup("h:1:d:u:pw\r\n", "h", 1, "d", "u").as_deref(),
        Some("pw")
    );
}

fn write(dir: &Path, text: &str, mode: u32) -> PathBuf {
    let path = dir.join("pgpass");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

#[test]
fn only_a_private_regular_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    assert!(read(&dir.path().join("none")).unwrap().is_none());
    let path = write(dir.path(), "h:*:*:*:pw\n", 0o600);
    assert_eq!(read(&path).unwrap().as_deref(), Some("h:*:*:*:pw\n"));
    for mode in [0o640, 0o604, 0o660] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        assert!(!err.contains("pw"), "{err}");
    }
    let err = read(dir.path()).unwrap_err().to_string();
    assert!(err.contains("not a regular file"), "{err}");
    let big = write(dir.path(), &"#".repeat(64 * 1024 + 1), 0o600);
    let err = read(&big).unwrap_err().to_string();
    assert!(err.contains("larger than 64 KiB"), "{err}");
}

#[test]
fn the_passfile_parameter_is_taken_out_of_either_form() {
    for (url, rest, file) in [
        (
            "postgres://u@h/d?passfile=/p/f",
            "postgres://u@h/d",
            Some("/p/f"),
        ),
        (
            "postgres://u@h/d?sslmode=disable&passfile=%2Fa%20b&user=x",
            "postgres://u@h/d?sslmode=disable&user=x",
            Some("/a b"),
        ),
        (
            "postgres://u@h/d?sslmode=disable&passfile=/f",
            "postgres://u@h/d?sslmode=disable",
            Some("/f"),
        ),
        (
            "host=h passfile='/a b' dbname=d",
            "host=h  dbname=d",
            Some("/a b"),
        ),
        ("host=h passfile=/a\\ b", "host=h ", Some("/a b")),
        ("host=h dbname=d", "host=h dbname=d", None),
        ("postgres://u@h/d", "postgres://u@h/d", None),
    ] {
        let (got, path) = take_param(url);
        assert_eq!(got, rest, "{url}");
        assert_eq!(path.as_deref(), file.map(Path::new), "{url}");
    }
}

#[test]
fn a_url_without_a_password_gets_the_passfiles_and_masks_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "other:5432:loops:app:wrong\ndb.example:5432:loops:app:from-the-file\n",
        0o600,
    );
    let text = format!(
        "postgresql://app@db.example/loops?passfile={}",
        path.display()
    );
    let url = DatabaseUrl::parse(&text).unwrap();
    assert_eq!(url.password_spellings(), ["from-the-file"]);
    assert_eq!(url.shown(), text);
    // A password in the URL wins; the file is not even read.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = format!(
        "postgresql://app:inline@db.example/loops?passfile={}",
        path.display()
    );
    let url = DatabaseUrl::parse(&text).unwrap();
    assert_eq!(url.password_spellings(), ["inline"]);
    // Without one, a file open to others is refused.
    let text = format!(
        "host=db.example user=app dbname=loops passfile={}",
        path.display()
    );
    let err = DatabaseUrl::parse(&text).unwrap_err().to_string();
    assert!(err.contains("refusing password file"), "{err}");
}

/// A string naming no user is looked up as the OS user by name, as the
/// connection logs in, whatever `$USER` and `$LOGNAME` say: checked in a
/// child of this test binary that has both naming someone else.
#[test]
fn a_string_without_a_user_is_looked_up_as_the_os_user_not_dollar_user() {
    const CHILD: &str = "LOOPS_TEST_PASSFILE_USER_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let config: Config = "host=/run/pg dbname=d".parse().unwrap();
        let user = &targets(&config)[0].user;
        assert_ne!(user, "someone-else");
        assert_eq!(user, &whoami::username().unwrap());
        return;
    }
    let name = format!(
        "{}::a_string_without_a_user_is_looked_up_as_the_os_user_not_dollar_user",
        module_path!().trim_start_matches("loops_store::")
    );
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--test-threads", "1"])
        .env(CHILD, "1")
        .env("USER", "someone-else")
        .env("LOGNAME", "someone-else")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
