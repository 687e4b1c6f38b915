//! The zone of the shell that runs `loops` (issue 28). A cron loop created
//! without `--tz` records it, so the loop fires on the clock of whoever made
//! it, not the daemon's; `doctor` names it for the original's cron rows,
//! which have no zone and run on the daemon's local time.

use loops_core::zone_name;

/// `TZ` when it names an IANA zone (`Asia/Kolkata`, `:Asia/Kolkata`, a
/// path under `zoneinfo/`), else the system's zone: the target of the
/// `/etc/localtime` link. `Ok(None)` when the system's zone has no name
/// (`/etc/localtime` is a copy, not a link); `Err(tz)` when `TZ` is set to
/// something that names no zone, such as the POSIX rule `IST-5:30`.
pub(crate) fn shell_zone(tz: Option<&str>) -> Result<Option<String>, String> {
    match tz.filter(|tz| !tz.trim().is_empty()) {
        Some(tz) => zone_name(tz)
            .map(|name| Some(name.to_owned()))
            .ok_or_else(|| tz.to_owned()),
        None => Ok(system_zone()),
    }
}

/// The zone `/etc/localtime` links to, on Linux and macOS alike.
fn system_zone() -> Option<String> {
    let link = std::fs::read_link("/etc/localtime").ok()?;
    zone_name(link.to_str()?).map(str::to_owned)
}

/// How a cron loop without a zone tells its time, in words: the zone
/// [`shell_zone`] finds for `tz`, for `doctor`.
pub(crate) fn local_time_in_words(tz: Option<&str>) -> String {
    match shell_zone(tz) {
        Ok(Some(name)) => name,
        Ok(None) => "the system's local time (its zone has no name here)".to_owned(),
        Err(tz) => format!("TZ={}", tz.chars().take(64).collect::<String>()),
    }
}
