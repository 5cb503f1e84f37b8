//! Planning: cycles and releases.

use super::*;

pub(super) fn invoke(
    store: &mut Store,
    _caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    match tool {
        "list_cycles" => {
            let a: ListCycles = parse(tool, args)?;
            Ok(json!({"cycles": store.cycles(a.team_id.as_deref(), a.kind.as_deref())?}))
        }
        "get_cycle" => {
            let a: Id = parse(tool, args)?;
            Ok(json!({"cycle": store.cycle(&a.id)?}))
        }
        "list_releases" => {
            let a: Limit = parse(tool, args)?;
            Ok(json!({"releases": store.releases(a.limit)?}))
        }
        "get_release" => {
            let a: Id = parse(tool, args)?;
            Ok(json!({"release": store.release(&a.id)?}))
        }
        other => Err(no_implementation(other)),
    }
}
