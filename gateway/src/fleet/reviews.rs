//! Landing review: a change handed in, a candidate read, a verdict given.
//! The mailbox decides who may do each from the seat's proof (the author
//! cannot decide; only the project's reviewer reads another's candidate).
//! Answers are the candidate view `types::views::candidate` writes.

use base64::Engine as _;
use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::fleet::args::{Submission, VerdictArgs};
use clankie_types::landing::Verdict;
use clankie_types::views::candidate as candidate_view;
use serde_json::Value;

use super::{Op, unanswered};
use clankie_runtime::clients::Answer as _;

impl Op<'_> {
    /// A candidate with its stored patch.
    pub(crate) async fn candidate(&self, candidate_id: String) -> Result<Value, ClankieError> {
        let req = self.request(mailbox_pb::GetReviewCandidateRequest { candidate_id })?;
        let c = self
            .shared
            .mailbox
            .clone()
            .get_review_candidate(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        Ok(candidate_view(&c, true))
    }

    pub(crate) async fn verdict(&self, v: VerdictArgs) -> Result<Value, ClankieError> {
        let req = self.request(mailbox_pb::ReviewVerdictRequest {
            candidate_id: v.candidate_id,
            patch_id: v.patch_id,
            verdict: Verdict::parse(&v.verdict)
                .ok_or_else(|| {
                    ErrorCode::InvalidArgument
                        .err(format!("verdict {}: approve or changes", v.verdict))
                })?
                .wire(),
            findings: v
                .findings
                .into_iter()
                .map(|f| mailbox_pb::Finding {
                    text: f.text,
                    file: f.file,
                    line: f.line,
                })
                .collect(),
            summary: v.summary,
        })?;
        let c = self
            .shared
            .mailbox
            .clone()
            .review_verdict(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        Ok(candidate_view(&c, false))
    }

    /// A change the bridge read from its checkout, handed in for review.
    pub(crate) async fn submit(&self, s: Submission) -> Result<Value, ClankieError> {
        let patch = base64::engine::general_purpose::STANDARD
            .decode(s.patch.as_bytes())
            .map_err(|_| ErrorCode::InvalidArgument.err("patch must be base64"))?;
        let req = self.request(mailbox_pb::SubmitReviewRequest {
            checkout: s.checkout,
            head: s.head,
            base: s.base,
            patch_id: s.patch_id,
            patch,
            summary: s.summary,
            issue: s.issue,
            evidence: s.evidence,
        })?;
        let c = self
            .shared
            .mailbox
            .clone()
            .submit_review(req)
            .await
            .verdict()
            .map_err(unanswered)?;
        Ok(candidate_view(&c, false))
    }
}
