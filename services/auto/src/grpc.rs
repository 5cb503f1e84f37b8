//! The gRPC surface: the switch and autonomy level, status, a round on
//! demand, a project's Auto status, and a lead's own wakes.

use super::*;

pub(super) fn autonomy_pb(a: &Autonomy, conversation: Option<&str>) -> auto_pb::Autonomy {
    auto_pb::Autonomy {
        on: a.on(),
        level: a.file.level.wire(),
        readable: a.problem.is_none(),
        problem: a.problem.clone().unwrap_or_default(),
        scheduled: a
            .file
            .scheduled
            .iter()
            .filter(|w| conversation.is_none_or(|c| w.conversation_id == c))
            .map(|w| auto_pb::ScheduledWake {
                wake_id: w.wake_id.clone(),
                conversation_id: w.conversation_id.clone(),
                at_ms: w.at_ms,
                note: w.note.clone(),
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl auto_pb::auto_server::Auto for AutoService {
    async fn get_switch(
        &self,
        request: Request<auto_pb::GetSwitchRequest>,
    ) -> Result<Response<auto_pb::Autonomy>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        Ok(Response::new(autonomy_pb(
            &files::read_autonomy(&self.inner.root),
            None,
        )))
    }

    async fn set_switch(
        &self,
        request: Request<auto_pb::SetSwitchRequest>,
    ) -> Result<Response<auto_pb::Autonomy>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let req = request.into_inner();
        let level = req
            .level
            .map(|l| {
                AutonomyLevel::from_wire(l).ok_or_else(|| {
                    refuse(
                        ErrorCode::InvalidArgument
                            .err(format!("level {l}: choose off, propose or full")),
                    )
                })
            })
            .transpose()?;
        let _g = self.inner.autonomy_lock.lock().await;
        let mut a = files::read_autonomy(&self.inner.root);
        if let Some(problem) = &a.problem {
            return Err(refuse(ErrorCode::AutoStateUnreadable.err(format!(
                "captain/autonomy.json cannot be read ({problem}); it reads as off. Repair or move it aside first"
            ))));
        }
        if let Some(on) = req.on {
            a.file.on = on;
        }
        if let Some(level) = level {
            a.file.level = level;
        }
        files::save_autonomy(&self.inner.root, &a.file).map_err(|e| refuse(internal(e)))?;
        tracing::info!(on = a.file.on, level = %a.file.level, "auto.switch");
        self.inner.changed.notify_one();
        Ok(Response::new(autonomy_pb(&a, None)))
    }

    async fn status(
        &self,
        request: Request<auto_pb::StatusRequest>,
    ) -> Result<Response<auto_pb::AutoStatus>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let cadence = self.inner.cadence.lock().await.clone();
        let (next, problem, leads) = match cadence {
            Ok(c) => (
                c.next_deadline_ms,
                String::new(),
                c.leads
                    .iter()
                    .map(|(id, f)| auto_pb::LeadCadence {
                        conversation_id: id.clone(),
                        accepted_fingerprint: f.accepted_fingerprint.clone(),
                        accepted_at_ms: f.accepted_at_ms,
                        pending_fingerprint: f
                            .pending
                            .as_ref()
                            .map(|p| p.fingerprint.clone())
                            .unwrap_or_default(),
                        pending_wake_id: f
                            .pending
                            .as_ref()
                            .map(|p| p.wake_id.clone())
                            .unwrap_or_default(),
                        pending_at_ms: f.pending.as_ref().map_or(0, |p| p.reserved_at_ms),
                    })
                    .collect(),
            ),
            Err(p) => (0, p, Vec::new()),
        };
        Ok(Response::new(auto_pb::AutoStatus {
            autonomy: Some(autonomy_pb(&files::read_autonomy(&self.inner.root), None)),
            next_deadline_ms: next,
            cadence_problem: problem,
            leads,
            last_round: Some(self.inner.last_round.lock().clone()),
            tick_ms: self.inner.tick.as_millis() as u64,
            idle_ms: self.inner.idle.as_millis() as u64,
            rounds: self.inner.rounds.load(std::sync::atomic::Ordering::Relaxed),
        }))
    }

    async fn run_round(
        &self,
        request: Request<auto_pb::RunRoundRequest>,
    ) -> Result<Response<auto_pb::RoundStats>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        if let Err(p) = self.inner.cadence.lock().await.as_ref() {
            return Err(refuse(ErrorCode::AutoStateUnreadable.err(p.clone())));
        }
        let _one = self.inner.round_lock.lock().await;
        self.round(now_ms()).await;
        let stats = self.inner.last_round.lock().clone();
        Ok(Response::new(stats))
    }

    async fn project_status(
        &self,
        request: Request<auto_pb::ProjectStatusRequest>,
    ) -> Result<Response<auto_pb::ProjectStatusResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refuse)?;
        let view = self.leads_now().await.map_err(refuse)?;
        let asks = self.open_asks().await;
        let mut lines = Vec::new();
        for p in &view.projects {
            let landed = {
                let mut n = 0;
                for w in &p.workspaces {
                    n += round::landed_since_midnight(std::path::Path::new(&w.path)).await;
                }
                n
            };
            lines.push(auto_pb::ProjectStatusLine {
                project_id: p.project_id.clone(),
                name: p.name.clone(),
                auto: p.auto,
                focus: p.focus.clone(),
                agents_working: view.live_workers(p).len() as u32,
                landed_today: landed,
                needs_you: asks
                    .iter()
                    .filter(|i| round::team_of(i) == Some(p.tracker_team.as_str()))
                    .filter(|_| !p.tracker_team.is_empty())
                    .count() as u32,
                lead_conversation_id: view.lead_of(p).conversation_id,
            });
        }
        Ok(Response::new(auto_pb::ProjectStatusResponse {
            projects: lines,
            needs_you_total: asks.len() as u32,
        }))
    }

    async fn get_wake(
        &self,
        request: Request<auto_pb::GetWakeRequest>,
    ) -> Result<Response<auto_pb::WakeState>, Status> {
        let lead = self.lead_of(&request).await.map_err(refuse)?;
        let a = files::read_autonomy(&self.inner.root);
        let cadence = self.inner.cadence.lock().await.clone();
        let (next, last) = match &cadence {
            Ok(c) => (
                c.next_deadline_ms,
                c.leads.get(&lead).map_or(0, |f| f.accepted_at_ms),
            ),
            Err(_) => (0, 0),
        };
        Ok(Response::new(auto_pb::WakeState {
            switch_on: a.on(),
            scheduled: autonomy_pb(&a, Some(&lead)).scheduled,
            conversation_id: lead,
            next_round_ms: if a.on() { next } else { 0 },
            last_wake_at_ms: last,
        }))
    }

    async fn schedule_wake(
        &self,
        request: Request<auto_pb::ScheduleWakeRequest>,
    ) -> Result<Response<auto_pb::ScheduledWake>, Status> {
        let lead = self.lead_of(&request).await.map_err(refuse)?;
        let req = request.into_inner();
        let now = now_ms();
        if req.at_ms <= now || req.at_ms > now + MAX_SELF_WAKE_AHEAD_MS {
            return Err(refuse(ErrorCode::InvalidArgument.err(
                "a self-wake is at a time in the future, at most 30 days ahead (atMs, ms since the epoch)",
            )));
        }
        if req.note.len() > clankie_types::fleet::limits::WAKE_NOTE {
            return Err(refuse(
                ErrorCode::InvalidArgument.err("a self-wake note is at most 2 KiB"),
            ));
        }
        let _g = self.inner.autonomy_lock.lock().await;
        let mut a = files::read_autonomy(&self.inner.root);
        if let Some(problem) = &a.problem {
            return Err(refuse(ErrorCode::AutoStateUnreadable.err(format!(
                "captain/autonomy.json cannot be read ({problem}); the switch reads as off"
            ))));
        }
        if !a.on() {
            return Err(refuse(ErrorCode::ProposeOnly.err(
                "the autonomy switch is off: scheduled self-wakes are stopped",
            )));
        }
        if a.file
            .scheduled
            .iter()
            .filter(|w| w.conversation_id == lead)
            .count()
            >= MAX_SELF_WAKES
        {
            return Err(refuse(ErrorCode::InvalidArgument.err(format!(
                "this lead already holds {MAX_SELF_WAKES} self-wakes"
            ))));
        }
        let wake = SelfWake {
            wake_id: format!("self_{}", uuid::Uuid::new_v4().simple()),
            conversation_id: lead,
            at_ms: req.at_ms,
            note: req.note,
        };
        a.file.scheduled.push(wake.clone());
        files::save_autonomy(&self.inner.root, &a.file).map_err(|e| refuse(internal(e)))?;
        self.inner.changed.notify_one();
        Ok(Response::new(auto_pb::ScheduledWake {
            wake_id: wake.wake_id,
            conversation_id: wake.conversation_id,
            at_ms: wake.at_ms,
            note: wake.note,
        }))
    }
}
