//! A workspace path as the owner approves it. A workspace on this machine
//! is an existing absolute folder (the mailbox checks it here); one on
//! another registered machine is kept as its exact normalized absolute
//! spelling for that machine's platform, and never canonicalized here:
//! this machine's filesystem knows nothing of another machine's paths.

/// The platforms a remote workspace may name.
pub const PLATFORMS: [&str; 3] = ["linux", "macos", "windows"];

/// `path` normalized for `platform`, or why it cannot be approved.
///
/// - windows: `/` becomes `\`, repeated separators collapse (a UNC
///   path keeps its leading `\\`), a trailing separator goes unless it is
///   the drive root; it must be absolute (`C:\…` or `\\server\share…`).
/// - linux, macos: repeated and trailing `/` go; it must start with `/`.
///
/// `.` and `..` components are refused rather than resolved: resolving
/// them is a question only the other machine can answer.
pub fn normalized(path: &str, platform: &str) -> Result<String, String> {
    let path = path.trim();
    if path.is_empty() || path.len() > 4096 || path.chars().any(char::is_control) {
        return Err("a workspace is 1 to 4096 characters with no control characters".into());
    }
    let (sep, unc, rest, prefix) = match platform {
        "windows" => {
            let p = path.replace('/', "\\");
            if let Some(rest) = p.strip_prefix("\\\\") {
                ('\\', true, rest.to_string(), "\\\\".to_string())
            } else {
                let mut chars = p.chars();
                match (chars.next(), chars.next(), chars.next()) {
                    (Some(d), Some(':'), Some('\\')) if d.is_ascii_alphabetic() => (
                        '\\',
                        false,
                        p[3..].to_string(),
                        format!("{}:\\", d.to_ascii_uppercase()),
                    ),
                    _ => {
                        return Err(format!(
                            "{path}: a Windows workspace is absolute (C:\\… or \\\\server\\share…)"
                        ));
                    }
                }
            }
        }
        "linux" | "macos" => match path.strip_prefix('/') {
            Some(rest) => ('/', false, rest.to_string(), "/".to_string()),
            None => return Err(format!("{path}: a {platform} workspace starts with /")),
        },
        other => {
            return Err(format!(
                "platform {other:?}: choose one of {}",
                PLATFORMS.join(", ")
            ));
        }
    };
    let parts: Vec<&str> = rest.split(sep).filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(format!("{path}: name the folder without . or .."));
    }
    if unc && parts.len() < 2 {
        return Err(format!("{path}: a UNC workspace names \\\\server\\share"));
    }
    Ok(format!("{prefix}{}", parts.join(&sep.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_spelling_is_normalized_for_its_platform_and_never_resolved() {
        for (path, platform, want) in [
            (r"C:\code\kh2", "windows", r"C:\code\kh2"),
            (r"c:/code//kh2\", "windows", r"C:\code\kh2"),
            (r"C:\", "windows", r"C:\"),
            (r"\\srv\share\kh2\", "windows", r"\\srv\share\kh2"),
            ("/home/me//kh2/", "linux", "/home/me/kh2"),
            ("/", "macos", "/"),
        ] {
            assert_eq!(normalized(path, platform).as_deref(), Ok(want), "{path}");
        }
        for (path, platform) in [
            (r"code\kh2", "windows"),
            (r"C:code", "windows"),
            (r"\\srv", "windows"),
            (r"C:\code\..\etc", "windows"),
            ("home/me", "linux"),
            ("/a/./b", "macos"),
            ("/a", "plan9"),
            ("", "linux"),
            ("/a\u{7}b", "linux"),
        ] {
            assert!(normalized(path, platform).is_err(), "{path} on {platform}");
        }
    }
}
