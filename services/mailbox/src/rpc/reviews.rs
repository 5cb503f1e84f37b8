//! Landing review: a worker submits the exact change, the project's reviewer
//! reads it and gives the verdict, and the author hears it.

use clankie_proto::mailbox::v1 as mailbox_pb;
use clankie_runtime::state::Guarded;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::Role;
use clankie_types::fleet::DeliveryKind;
use clankie_types::landing::{ReviewState, Verdict};
use tonic::{Request, Response};

use crate::convert::*;
use crate::store::{HireRec, now_ms};
use crate::{MailboxService, internal, short_id};
use crate::{reviews, seats};

impl MailboxService {
    /// Changes the review book (see [`crate::change`]).
    pub(crate) fn change_reviews<R>(
        &self,
        book: &mut Guarded<reviews::ReviewBook>,
        change: impl FnOnce(&mut reviews::ReviewBook) -> Result<R, ClankieError>,
    ) -> Result<R, ClankieError> {
        crate::change(book, "the review book", change)
    }

    /// The open hire holding a seat's pane.
    pub(crate) async fn hire_of(&self, seat: &seats::SeatRec) -> Option<HireRec> {
        self.inner
            .store
            .lock()
            .await
            .state
            .hire_in(&seat.link_id, &seat.pane_id)
            .cloned()
    }

    /// Whether a seat is a reviewer of a project: its open hire there was
    /// hired as reviewer.
    pub(crate) async fn is_reviewer(&self, seat: &seats::SeatRec, project_id: &str) -> bool {
        self.hire_of(seat)
            .await
            .is_some_and(|h| h.project_id == project_id && h.role == Role::Reviewer)
    }

    pub(crate) fn read_patch(&self, sha: &str) -> Vec<u8> {
        std::fs::read(self.inner.patches_dir.join(format!("{sha}.patch"))).unwrap_or_default()
    }

    pub(crate) async fn submit_review(
        &self,
        request: Request<mailbox_pb::SubmitReviewRequest>,
    ) -> Result<Response<mailbox_pb::ReviewCandidate>, ClankieError> {
        let (me, _) = self.native_seat(&request).await?;
        let req = request.into_inner();
        let bad = |m: &str| ErrorCode::InvalidArgument.err(m.to_string());
        if !req.checkout.starts_with('/') {
            return Err(bad("the checkout must be an absolute path"));
        }
        if !reviews::is_object_name(&req.head)
            || !reviews::is_object_name(&req.base)
            || !reviews::is_object_name(&req.patch_id)
        {
            return Err(bad("head, base and patch-id must be full hex object names"));
        }
        if req.patch.is_empty() || req.summary.trim().is_empty() {
            return Err(bad("a candidate needs a non-empty patch and a summary"));
        }
        if req.patch.len() > clankie_runtime::limits::MAX_CANDIDATE_PATCH {
            return Err(ErrorCode::PayloadTooLarge.err(format!(
                "a review candidate holds at most {} MiB of patch; nothing was stored",
                clankie_runtime::limits::MAX_CANDIDATE_PATCH >> 20
            )));
        }
        // What the reviewer will read is what the patch-id names: the
        // service computes it from the bytes it stores, never takes it.
        let computed = reviews::patch_id(&req.patch, &self.inner.patches_dir).await?;
        if computed != req.patch_id {
            return Err(ErrorCode::PatchMismatch
                .err("the patch-id does not match the patch bytes; nothing was stored"));
        }
        let hire = self.hire_of(&me).await.ok_or_else(|| {
            ErrorCode::ReviewNotConfigured
                .err("only a hired seat of a project can submit for review")
        })?;
        let project = {
            let store = self.inner.store.lock().await;
            store
                .state
                .projects
                .iter()
                .find(|p| p.project_id == hire.project_id)
                .cloned()
        };
        let Some(project) = project.filter(|p| p.standing_reviewer) else {
            return Err(ErrorCode::ReviewNotConfigured
                .err("this seat's project names no standing reviewer"));
        };
        // The checkout, symlinks resolved, lies in one of the project's
        // registered workspaces.
        let checkout = reviews::inside_workspaces(&req.checkout, &project.workspaces)?;
        // A live reviewer seat of the project, other than the author.
        let reviewer_hires: Vec<HireRec> = {
            let store = self.inner.store.lock().await;
            store
                .state
                .hires
                .iter()
                .filter(|h| {
                    h.is_open() && h.project_id == hire.project_id && h.role == Role::Reviewer
                })
                .cloned()
                .collect()
        };
        let reviewer = {
            let book = self.inner.book.lock().await;
            book.seats
                .iter()
                .filter(|s| !s.gone && s.seat_id != me.seat_id)
                .filter(|s| {
                    reviewer_hires
                        .iter()
                        .any(|h| h.link_id == s.link_id && h.pane_id == s.pane_id)
                })
                .find(|s| self.reachable(&s.seat_id))
                .cloned()
        };
        let Some(reviewer) = reviewer else {
            return Err(ErrorCode::NoReviewer
                .err("no live reviewer seat other than the author; nothing was stored"));
        };
        if self.inner.reviews.lock().await.pending_of(&me.seat_id) >= reviews::MAX_PENDING_PER_SEAT
        {
            return Err(ErrorCode::ReviewQuota.err(format!(
                "this seat already has {} candidates waiting for a verdict; nothing was stored",
                reviews::MAX_PENDING_PER_SEAT
            )));
        }
        let sha = reviews::sha256_hex(&req.patch);
        let patch_path = self.inner.patches_dir.join(format!("{sha}.patch"));
        if !patch_path.exists() {
            clankie_runtime::state::atomic_write(&patch_path, &req.patch).map_err(internal)?;
        }
        let mut book = self.inner.reviews.lock().await;
        let candidate = reviews::CandidateRec {
            candidate_id: short_id("cand"),
            project_id: hire.project_id.clone(),
            author_seat: me.seat_id.clone(),
            author_hire: hire.hire_id.clone(),
            reviewer_seat: reviewer.seat_id.clone(),
            checkout,
            head: req.head,
            base: req.base,
            patch_id: req.patch_id,
            patch_sha256: sha,
            summary: req.summary.chars().take(4000).collect(),
            issue: req.issue.chars().take(200).collect(),
            evidence: req.evidence.chars().take(8000).collect(),
            state: ReviewState::Pending,
            findings: Vec::new(),
            verdict_summary: String::new(),
            previous: book.previous_for(&hire.project_id, &req.issue),
            created_at_ms: now_ms(),
            decided_at_ms: 0,
        };
        self.change_reviews(&mut book, |b| {
            b.candidates.push(candidate.clone());
            Ok(())
        })?;
        drop(book);
        let text = format!(
            "Review candidate {} from seat {}: {} (issue {}, HEAD {}, patch-id {}). Read it with review_candidate, decide with review_verdict.",
            candidate.candidate_id,
            me.seat_id,
            candidate.summary,
            if candidate.issue.is_empty() {
                "none"
            } else {
                &candidate.issue
            },
            candidate.head,
            candidate.patch_id
        );
        self.deliver(
            &reviewer,
            DeliveryKind::Review,
            format!("seat:{}", me.seat_id),
            text,
        )
        .await?;
        tracing::info!(candidate = %candidate.candidate_id, "mailbox.review.submitted");
        Ok(Response::new(candidate_pb(&candidate, Vec::new())))
    }

    pub(crate) async fn get_review_candidate(
        &self,
        request: Request<mailbox_pb::GetReviewCandidateRequest>,
    ) -> Result<Response<mailbox_pb::ReviewCandidate>, ClankieError> {
        let (me, _) = self.native_seat(&request).await?;
        let id = request.into_inner().candidate_id;
        let c = self
            .inner
            .reviews
            .lock()
            .await
            .get(&id)
            .cloned()
            .ok_or_else(|| ErrorCode::CandidateNotFound.err(format!("no candidate {id}")))?;
        if c.author_seat != me.seat_id && !self.is_reviewer(&me, &c.project_id).await {
            return Err(ErrorCode::NotReviewer
                .err("only the author and the project's reviewer read a candidate"));
        }
        Ok(Response::new(candidate_pb(
            &c,
            self.read_patch(&c.patch_sha256),
        )))
    }

    pub(crate) async fn review_verdict(
        &self,
        request: Request<mailbox_pb::ReviewVerdictRequest>,
    ) -> Result<Response<mailbox_pb::ReviewCandidate>, ClankieError> {
        let (me, _) = self.native_seat(&request).await?;
        let req = request.into_inner();
        let mut book = self.inner.reviews.lock().await;
        let index = book
            .candidates
            .iter()
            .position(|c| c.candidate_id == req.candidate_id)
            .ok_or_else(|| {
                ErrorCode::CandidateNotFound.err(format!("no candidate {}", req.candidate_id))
            })?;
        let candidate = book.candidates[index].clone();
        if candidate.author_seat == me.seat_id {
            return Err(ErrorCode::NotReviewer.err("the author cannot decide its own candidate"));
        }
        if !self.is_reviewer(&me, &candidate.project_id).await {
            return Err(
                ErrorCode::NotReviewer.err("only the project's reviewer decides a candidate")
            );
        }
        let findings: Vec<reviews::FindingRec> = req
            .findings
            .iter()
            .map(|f| reviews::FindingRec {
                text: f.text.clone(),
                file: f.file.clone(),
                line: f.line,
            })
            .collect();
        let verdict = Verdict::from_wire(req.verdict)
            .ok_or_else(|| ErrorCode::InvalidArgument.err("a verdict is approve or changes"))?;
        reviews::check_verdict(&candidate, &req.patch_id, verdict, &findings)
            .map_err(|(code, m)| code.err(m))?;
        let decided = self.change_reviews(&mut book, |b| {
            let c = &mut b.candidates[index];
            c.state = verdict.state();
            c.findings = findings;
            c.verdict_summary = req.summary.chars().take(4000).collect();
            c.decided_at_ms = now_ms();
            Ok(c.clone())
        })?;
        drop(book);
        // The author hears the verdict on its seat.
        let author = self
            .inner
            .book
            .lock()
            .await
            .seat(&decided.author_seat)
            .cloned();
        if let Some(author) = author.filter(|a| !a.gone) {
            let text = format!(
                "Review of {}: {}{}",
                decided.candidate_id,
                decided.state,
                if decided.verdict_summary.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", decided.verdict_summary)
                }
            );
            if let Err(e) = self
                .deliver(
                    &author,
                    DeliveryKind::Review,
                    format!("seat:{}", me.seat_id),
                    text,
                )
                .await
            {
                tracing::warn!(error = %e, "verdict not queued for the author");
            }
        }
        Ok(Response::new(candidate_pb(&decided, Vec::new())))
    }

    pub(crate) async fn list_reviews(
        &self,
        request: Request<mailbox_pb::ListReviewsRequest>,
    ) -> Result<Response<mailbox_pb::ListReviewsResponse>, ClankieError> {
        self.owner(&request)?;
        let id = request.into_inner().candidate_id;
        let book = self.inner.reviews.lock().await;
        let candidates = book
            .candidates
            .iter()
            .filter(|c| id.is_empty() || c.candidate_id == id)
            .map(|c| {
                let patch = if id.is_empty() {
                    Vec::new()
                } else {
                    self.read_patch(&c.patch_sha256)
                };
                candidate_pb(c, patch)
            })
            .collect();
        Ok(Response::new(mailbox_pb::ListReviewsResponse {
            candidates,
        }))
    }
}
