//! The gRPC surface: admission of bearers and local connections, the
//! recheck before every effect, seat observation (the gateway only), and the
//! owner's links, status and settings.

use super::*;

pub(super) type MachineStream =
    Pin<Box<dyn Stream<Item = Result<admission_pb::Machine, Status>> + Send>>;

pub(super) type SettingsStream =
    Pin<Box<dyn Stream<Item = Result<admission_pb::FleetSettings, Status>> + Send>>;

#[tonic::async_trait]
impl admission_pb::admission_server::Admission for AdmissionService {
    async fn admit(
        &self,
        request: Request<admission_pb::AdmitRequest>,
    ) -> Result<Response<admission_pb::AdmitResponse>, Status> {
        let bearer = request.into_inner().bearer;
        let (link_id, principal) = self
            .admit_bearer(&bearer)
            .inspect(|_| metrics::proved("bearer"))
            .inspect_err(|e| metrics::refused("bearer", e.code.as_str()))
            .map_err(refused)?;
        let ticket = self.issue_ticket(link_id, principal.clone(), None);
        let settings = self.inner.settings.borrow().to_pb();
        Ok(Response::new(admission_pb::AdmitResponse {
            ticket,
            principal: Some(principal),
            settings: Some(settings),
        }))
    }

    async fn recheck(
        &self,
        request: Request<admission_pb::RecheckRequest>,
    ) -> Result<Response<admission_pb::RecheckResponse>, Status> {
        self.answer_recheck(request, true).await
    }

    async fn ticket_principal(
        &self,
        request: Request<admission_pb::RecheckRequest>,
    ) -> Result<Response<admission_pb::RecheckResponse>, Status> {
        self.answer_recheck(request, false).await
    }

    async fn create_fleet_token(
        &self,
        request: Request<admission_pb::CreateFleetTokenRequest>,
    ) -> Result<Response<admission_pb::CreateFleetTokenResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refused)?;
        let req = request.into_inner();
        check_fleet_name(&req.fleet).map_err(refused)?;
        if req.expires_in_ms < 0 {
            return Err(refused(
                ErrorCode::InvalidArgument.err("an expiry is a positive duration"),
            ));
        }
        let token = owner::random_token("clkf");
        let record = LinkRecord {
            link_id: format!("link-{}", &owner::random_token("x")[2..14]),
            fleet: req.fleet,
            kind: LinkKind::Bearer,
            label: req.label,
            token_sha256: owner::token_hash(&token),
            created_at_ms: now_ms(),
            socket: String::new(),
            session: String::new(),
            expires_at_ms: if req.expires_in_ms == 0 {
                0
            } else {
                now_ms().saturating_add(req.expires_in_ms)
            },
        };
        {
            let mut guard = lock(&self.inner.links);
            self.add_link(&mut guard, record.clone())?;
        }
        tracing::info!(fleet = %record.fleet, link = %record.link_id, "fleet bearer link created");
        Ok(Response::new(admission_pb::CreateFleetTokenResponse {
            token,
            link: Some(link_pb(&record)),
        }))
    }

    async fn revoke_fleet_link(
        &self,
        request: Request<admission_pb::RevokeFleetLinkRequest>,
    ) -> Result<Response<admission_pb::RevokeFleetLinkResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refused)?;
        let link_id = request.into_inner().link_id;
        let revoked = {
            let mut guard = lock(&self.inner.links);
            if guard.unreadable().is_some() {
                return Err(save_refusal(GuardError::Unreadable));
            }
            let found = guard.links.iter().any(|l| l.link_id == link_id);
            if found {
                guard
                    .update(|next| next.links.retain(|l| l.link_id != link_id))
                    .map_err(save_refusal)?;
            }
            found
        };
        if revoked {
            lock(&self.inner.tickets).retain(|_, t| t.link_id != link_id);
        }
        Ok(Response::new(admission_pb::RevokeFleetLinkResponse {
            revoked,
        }))
    }

    async fn fleet_status(
        &self,
        request: Request<admission_pb::FleetStatusRequest>,
    ) -> Result<Response<admission_pb::FleetStatusResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refused)?;
        Ok(Response::new(self.status()))
    }

    async fn set_fleet_settings(
        &self,
        request: Request<admission_pb::SetFleetSettingsRequest>,
    ) -> Result<Response<admission_pb::FleetStatusResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refused)?;
        let req = request.into_inner();
        let mut current = self.inner.settings.borrow().clone();
        let tools = match FleetTools::try_from(req.tools) {
            Ok(FleetTools::Connected) => ToolsSetting::Connected,
            Ok(FleetTools::Off) => ToolsSetting::Off,
            Ok(FleetTools::Unspecified)
                if req.peer_messages.is_some() || req.worker_sandbox.is_some() =>
            {
                current.file().tools
            }
            _ => {
                return Err(refused(
                    ErrorCode::InvalidArgument.err("tools must be connected or off"),
                ));
            }
        };
        let peer_messages = req.peer_messages.unwrap_or(current.file().peer_messages);
        let worker_sandbox = req.worker_sandbox.unwrap_or(current.file().worker_sandbox);
        if current.unreadable()
            && (tools == ToolsSetting::Connected || peer_messages || !worker_sandbox)
        {
            // Turning tools on over an unreadable file would discard it; the
            // owner must inspect it first. Turning off is always safe.
            return Err(refused(ErrorCode::Internal
                .err("fleet settings file is unreadable; move it aside before turning tools or peer messages on or the worker sandbox off")));
        }
        if current.unreadable()
            || current.file().tools != tools
            || current.file().peer_messages != peer_messages
            || current.file().worker_sandbox != worker_sandbox
        {
            let file = SettingsFile {
                tools,
                revision: current.file().revision + 1,
                peer_messages,
                worker_sandbox,
            };
            current.0.replace(file).map_err(|e| {
                refused(ErrorCode::Internal.err(format!("could not save fleet settings: {e}")))
            })?;
            tracing::info!(tools = ?tools, peer_messages, worker_sandbox, "fleet settings changed");
            self.inner.settings.send_replace(current);
        }
        Ok(Response::new(self.status()))
    }

    async fn create_local_link(
        &self,
        request: Request<admission_pb::CreateLocalLinkRequest>,
    ) -> Result<Response<admission_pb::FleetLink>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refused)?;
        let req = request.into_inner();
        check_fleet_name(&req.fleet).map_err(refused)?;
        let Some(kind) = LinkKind::from_wire(req.kind).filter(|k| k.is_pane_host()) else {
            return Err(refused(
                ErrorCode::InvalidArgument.err("a local link is tmux or herdr"),
            ));
        };
        if !req.socket.starts_with('/') {
            return Err(refused(
                ErrorCode::InvalidArgument.err("give the multiplexer's socket as an absolute path"),
            ));
        }
        let record = LinkRecord {
            link_id: format!("link-{}", &owner::random_token("x")[2..14]),
            fleet: req.fleet,
            kind,
            label: String::new(),
            token_sha256: String::new(),
            created_at_ms: now_ms(),
            socket: req.socket,
            session: req.session,
            expires_at_ms: 0,
        };
        {
            let mut guard = lock(&self.inner.links);
            self.add_link(&mut guard, record.clone())?;
        }
        tracing::info!(fleet = %record.fleet, link = %record.link_id, kind = %record.kind, "fleet local link created");
        Ok(Response::new(link_pb(&record)))
    }

    async fn prove_local(
        &self,
        request: Request<admission_pb::ProveLocalRequest>,
    ) -> Result<Response<admission_pb::AdmitResponse>, Status> {
        // The pid is named by the kernel to the gateway; nobody else may name one.
        listener::require_service(&request, "gateway")?;
        let peer = local::Peer::from_request(&request.into_inner());
        let (link, proof) = self.prove_peer(&peer).await?;
        let principal = Principal {
            fleet_id: proof.fleet.clone(),
            pane_id: proof.pane_id.clone(),
            mode: AdmissionMode::Local as i32,
            link_id: proof.link_id.clone(),
            machine: String::new(),
        };
        let ticket = self.issue_ticket(
            proof.link_id.clone(),
            principal.clone(),
            Some((link, proof)),
        );
        let settings = self.inner.settings.borrow().to_pb();
        Ok(Response::new(admission_pb::AdmitResponse {
            ticket,
            principal: Some(principal),
            settings: Some(settings),
        }))
    }

    async fn observe_ticket_seat(
        &self,
        request: Request<admission_pb::RecheckRequest>,
    ) -> Result<Response<admission_pb::SeatIdentity>, Status> {
        let ticket = request.into_inner().ticket;
        // The ticket and its link must stand; the seat observation below
        // rechecks the proof itself, in its own bracket.
        let (_, settings) = self.recheck(&ticket, false).await.map_err(refused)?;
        let local = lock(&self.inner.tickets)
            .get(&ticket)
            .and_then(|t| t.local.clone());
        let Some((link, proof)) = local else {
            return Err(refused(ErrorCode::LocalProcessMembershipRequired.err(
                "a native seat needs a proven pane process; bearer links have none",
            )));
        };
        let began = clankie_runtime::clock::monotonic_ns();
        let mut seat = match local::observe_seat(&self.inner.helper, &link, &proof).await {
            Ok(seat) => seat,
            Err(local::SeatRefusal::Stale(r)) => {
                // A stale proof is no seat, and no proof either.
                lock(&self.inner.tickets).remove(&ticket);
                self.count_refusal(r.reason);
                return Err(already_logged(r.error));
            }
            Err(local::SeatRefusal::NoSeat(r)) => {
                self.count_refusal(r.reason);
                return Err(already_logged(r.error));
            }
        };
        self.rechecked(&ticket, began);
        seat.settings = Some(settings);
        Ok(Response::new(seat))
    }

    async fn seat_status(
        &self,
        request: Request<admission_pb::SeatStatusRequest>,
    ) -> Result<Response<admission_pb::SeatStatusResponse>, Status> {
        let asked = request.into_inner();
        let (ticket, since) = (asked.ticket, asked.held_since_monotonic_ns);
        let local = lock(&self.inner.tickets)
            .get(&ticket)
            .and_then(|t| t.local.clone());
        let Some((link, proof)) = local else {
            return Ok(Response::new(admission_pb::SeatStatusResponse::default()));
        };
        let agent_status = local::agent_status(&link, &proof.pane_id)
            .await
            .map_err(|r| already_logged(r.error))?;
        Ok(Response::new(admission_pb::SeatStatusResponse {
            agent_status,
            held_since: self.held_since(&ticket, since),
        }))
    }

    async fn observe_seat(
        &self,
        request: Request<admission_pb::ProveLocalRequest>,
    ) -> Result<Response<admission_pb::SeatIdentity>, Status> {
        listener::require_service(&request, "gateway")?;
        let peer = local::Peer::from_request(&request.into_inner());
        let (link, proof) = self.prove_peer(&peer).await?;
        let seat = local::observe_seat(&self.inner.helper, &link, &proof)
            .await
            .map_err(|r| {
                let r = r.refusal();
                self.count_refusal(r.reason);
                already_logged(r.error)
            })?;
        Ok(Response::new(seat))
    }

    async fn add_machine(
        &self,
        request: Request<admission_pb::AddMachineRequest>,
    ) -> Result<Response<admission_pb::AddMachineResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refused)?;
        let req = request.into_inner();
        let (machine, secret) = machines::add(
            &mut lock(&self.inner.machines),
            &req.name,
            &req.fleet,
            req.expires_in_ms,
            now_ms(),
        )
        .map_err(refused)?;
        tracing::info!(fleet = %machine.fleet, machine = %machine.name, "machine registered");
        Ok(Response::new(admission_pb::AddMachineResponse {
            machine: Some(machine.to_pb()),
            enrolment_secret: secret,
        }))
    }

    async fn list_machines(
        &self,
        request: Request<admission_pb::ListMachinesRequest>,
    ) -> Result<Response<admission_pb::ListMachinesResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refused)?;
        let mut list = machines::list(&lock(&self.inner.machines));
        for m in &mut list.machines {
            self.inner.machine_links.fill(m);
        }
        Ok(Response::new(list))
    }

    async fn remove_machine(
        &self,
        request: Request<admission_pb::RemoveMachineRequest>,
    ) -> Result<Response<admission_pb::RemoveMachineResponse>, Status> {
        self.inner
            .owner
            .verify(request.metadata())
            .map_err(refused)?;
        let name = request.into_inner().name;
        machines::remove(&mut lock(&self.inner.machines), &name).map_err(refused)?;
        // Its link ends now: the hold learns the machine is gone.
        self.inner.machine_links.forget(&name);
        self.inner.machine_links.touch();
        tracing::info!(machine = %name, "machine removed");
        Ok(Response::new(admission_pb::RemoveMachineResponse {}))
    }

    async fn enrol_machine(
        &self,
        request: Request<admission_pb::EnrolMachineRequest>,
    ) -> Result<Response<admission_pb::Machine>, Status> {
        // Only the gateway read the key from a TLS handshake; anyone else
        // naming one names a key it may not hold.
        listener::require_service(&request, "gateway")?;
        let req = request.into_inner();
        let machine = machines::enrol(
            &mut lock(&self.inner.machines),
            &req.name,
            &req.secret,
            &req.key_sha256,
            now_ms(),
        )
        .map_err(refused)?;
        tracing::info!(fleet = %machine.fleet, machine = %machine.name, "machine enrolled");
        Ok(Response::new(machine.to_pb()))
    }

    async fn prove_machine(
        &self,
        request: Request<admission_pb::ProveMachineRequest>,
    ) -> Result<Response<admission_pb::Machine>, Status> {
        listener::require_service(&request, "gateway")?;
        let key = request.into_inner().key_sha256;
        let machine = machines::by_key(&lock(&self.inner.machines), &key).map_err(refused)?;
        Ok(Response::new(machine.to_pb()))
    }

    async fn admit_relay(
        &self,
        request: Request<admission_pb::AdmitRelayRequest>,
    ) -> Result<Response<admission_pb::AdmitResponse>, Status> {
        listener::require_service(&request, "gateway")?;
        let req = request.into_inner();
        if !machines::valid_pane(&req.pane_id) {
            return Err(refused(
                ErrorCode::InvalidArgument
                    .err("a relayed pane id is 1 to 64 letters, digits or %_.-"),
            ));
        }
        let machine =
            machines::by_key(&lock(&self.inner.machines), &req.key_sha256).map_err(refused)?;
        let Some(holder) = self.inner.machine_links.holder(&machine.name) else {
            return Err(refused(ErrorCode::FleetAdmissionRevoked.err(
                "this machine's relay link is down; its requests are admitted again once it is back",
            )));
        };
        let principal = Principal {
            fleet_id: machine.fleet.clone(),
            pane_id: req.pane_id,
            mode: AdmissionMode::Relay as i32,
            link_id: format!("machine:{}", machine.name),
            machine: machine.name.clone(),
        };
        let ticket = self.issue_relay_ticket(&machine.name, holder, principal.clone());
        metrics::proved("relay");
        Ok(Response::new(admission_pb::AdmitResponse {
            ticket,
            principal: Some(principal),
            settings: Some(self.inner.settings.borrow().to_pb()),
        }))
    }

    type HoldMachineLinkStream = MachineStream;

    async fn hold_machine_link(
        &self,
        request: Request<tonic::Streaming<admission_pb::LinkReport>>,
    ) -> Result<Response<Self::HoldMachineLinkStream>, Status> {
        listener::require_service(&request, "gateway")?;
        let mut reports = request.into_inner();
        let first = reports
            .message()
            .await?
            .ok_or_else(|| refused(ErrorCode::InvalidArgument.err("a link opens with its key")))?;
        let key = first.key_sha256;
        // Subscribed first, and proven and opened under the machines lock:
        // a removal or a newer link after this point is always heard.
        let mut changed = self.inner.machine_links.subscribe();
        let (machine, holder) = {
            let file = lock(&self.inner.machines);
            let machine = machines::by_key(&file, &key).map_err(refused)?;
            let holder = self.inner.machine_links.open(&machine.name, now_ms());
            (machine, holder)
        };
        let name = machine.name.clone();
        tracing::info!(fleet = %machine.fleet, machine = %name, "machine linked");
        let mut first = machine.to_pb();
        self.inner.machine_links.fill(&mut first);
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let _ = tx.send(Ok(first)).await;
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let ended = loop {
                tokio::select! {
                    report = reports.message() => match report {
                        Ok(Some(r)) => inner.machine_links.report(&name, holder, r.rtt_ms, r.in_flight),
                        // The gateway let go: the stream with the machine ended.
                        _ => break None,
                    },
                    seen = changed.changed() => {
                        if seen.is_err() {
                            break None;
                        }
                        let still = machines::by_key(&lock(&inner.machines), &key)
                            .is_ok_and(|m| m.name == name);
                        if !still {
                            break Some(ErrorCode::MachineNotFound.err(
                                "this machine was removed from the fleet; its link ends now",
                            ));
                        }
                        if !inner.machine_links.current(&name, holder) {
                            break Some(ErrorCode::FleetAdmissionRevoked.err(
                                "a newer link of this machine replaced this one",
                            ));
                        }
                    }
                    () = tx.closed() => break None,
                }
            };
            inner.machine_links.close(&name, holder, now_ms());
            tracing::info!(machine = %name, "machine unlinked");
            if let Some(e) = ended {
                let _ = tx.send(Err(refused(e))).await;
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    type WatchSettingsStream = SettingsStream;

    async fn watch_settings(
        &self,
        _request: Request<admission_pb::WatchSettingsRequest>,
    ) -> Result<Response<Self::WatchSettingsStream>, Status> {
        let rx = self.inner.settings.subscribe();
        let stream = tokio_stream::wrappers::WatchStream::new(rx).map(|s| Ok(s.to_pb()));
        Ok(Response::new(Box::pin(stream)))
    }
}

impl AdmissionService {
    /// `Recheck` (`observe`) or `TicketPrincipal`: the ticket's principal
    /// and the settings now.
    async fn answer_recheck(
        &self,
        request: Request<admission_pb::RecheckRequest>,
        observe: bool,
    ) -> Result<Response<admission_pb::RecheckResponse>, Status> {
        let ticket = request.into_inner().ticket;
        let (principal, settings) = self.recheck(&ticket, observe).await.map_err(refused)?;
        Ok(Response::new(admission_pb::RecheckResponse {
            principal: Some(principal),
            settings: Some(settings),
        }))
    }
}
