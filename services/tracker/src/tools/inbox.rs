//! The lead's inbox.

use super::*;

pub(super) fn invoke(
    store: &mut Store,
    caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    match tool {
        "list_inbox" => {
            let a: ListInbox = parse(tool, args)?;
            let items = store.inbox(a.include_resolved.unwrap_or(false), a.limit)?;
            Ok(json!({ "items": items }))
        }
        "get_inbox_item" => {
            let a: Id = parse(tool, args)?;
            let (item, target) = store.inbox_item(&a.id)?;
            let mut out = Map::new();
            out.insert("item".into(), serde_json::to_value(item)?);
            if let Value::Object(t) = serde_json::to_value(target)? {
                out.extend(t);
            }
            Ok(Value::Object(out))
        }
        "save_inbox_item" => {
            let a: SaveInboxItem = parse(tool, args)?;
            written("item", store.save_inbox_item(caller, a)?)
        }
        "post_inbox_answer" => {
            let a: PostInboxAnswer = parse(tool, args)?;
            flat(store.post_inbox_answer(caller, a)?)
        }
        other => Err(no_implementation(other)),
    }
}
