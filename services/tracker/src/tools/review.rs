//! Guided reviews.

use super::*;

pub(super) fn invoke(
    store: &mut Store,
    caller: &Caller,
    tool: &str,
    args: Value,
) -> Result<Value, StoreError> {
    match tool {
        "save_guided_review" => {
            let a: SaveGuidedReview = parse(tool, args)?;
            written("review", store.save_guided_review(caller, a)?)
        }
        "get_guided_review" => {
            let a: Id = parse(tool, args)?;
            let review = store.guided_review(&a.id)?;
            let steps = store.guided_review_steps(&review.id)?;
            Ok(json!({ "review": review, "steps": steps }))
        }
        "list_guided_reviews" => {
            let a: ListReviews = parse(tool, args)?;
            let reviews =
                store.guided_reviews(a.issue_id.as_deref(), a.state.as_deref(), a.limit)?;
            Ok(json!({ "reviews": reviews }))
        }
        "save_guided_review_step" => {
            let a: SaveGuidedReviewStep = parse(tool, args)?;
            written("step", store.save_guided_review_step(caller, a)?)
        }
        "list_guided_review_steps" => {
            let a: ReviewArg = parse(tool, args)?;
            Ok(json!({"steps": store.guided_review_steps(&a.review_id)?}))
        }
        "post_guided_review_step_result" => {
            let a: PostStepResult = parse(tool, args)?;
            written("step", store.post_guided_review_step_result(caller, a)?)
        }
        "post_guided_review_comment" => {
            let a: PostReviewComment = parse(tool, args)?;
            written("comment", store.post_guided_review_comment(caller, a)?)
        }
        "list_guided_review_comments" => {
            let a: ReviewArg = parse(tool, args)?;
            Ok(json!({"comments": store.guided_review_comments(&a.review_id)?}))
        }
        "post_guided_review_submit" => {
            let a: ReviewRef = parse(tool, args)?;
            written("review", store.post_guided_review_submit(caller, a)?)
        }
        "list_guided_review_events" => {
            let a: ReviewArg = parse(tool, args)?;
            Ok(json!({"events": store.guided_review_events(&a.review_id)?}))
        }
        "post_retire_guided_review" => {
            let a: RetireReview = parse(tool, args)?;
            written("review", store.post_retire_guided_review(caller, a)?)
        }
        other => Err(no_implementation(other)),
    }
}
