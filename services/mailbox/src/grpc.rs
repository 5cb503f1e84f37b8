//! The gRPC surface: each RPC delegates to its handler in `rpc/`, in the
//! order the proto declares them.

use clankie_proto::mailbox::v1 as mailbox_pb;
use tonic::{Request, Response, Status};

use clankie_runtime::refuse::mailbox as refuse;

use crate::MailboxService;

#[tonic::async_trait]
impl mailbox_pb::mailbox_server::Mailbox for MailboxService {
    async fn add_project(
        &self,
        request: Request<mailbox_pb::AddProjectRequest>,
    ) -> Result<Response<mailbox_pb::Project>, Status> {
        MailboxService::add_project(self, request)
            .await
            .map_err(refuse)
    }

    async fn list_projects(
        &self,
        request: Request<mailbox_pb::ListProjectsRequest>,
    ) -> Result<Response<mailbox_pb::ListProjectsResponse>, Status> {
        MailboxService::list_projects(self, request)
            .await
            .map_err(refuse)
    }

    async fn update_project(
        &self,
        request: Request<mailbox_pb::UpdateProjectRequest>,
    ) -> Result<Response<mailbox_pb::Project>, Status> {
        MailboxService::update_project(self, request)
            .await
            .map_err(refuse)
    }

    async fn wake(
        &self,
        request: Request<mailbox_pb::WakeRequest>,
    ) -> Result<Response<mailbox_pb::WakeResponse>, Status> {
        MailboxService::wake(self, request).await.map_err(refuse)
    }

    async fn wake_receipt(
        &self,
        request: Request<mailbox_pb::WakeReceiptRequest>,
    ) -> Result<Response<mailbox_pb::WakeResponse>, Status> {
        MailboxService::wake_receipt(self, request)
            .await
            .map_err(refuse)
    }

    async fn resolve_caller(
        &self,
        request: Request<mailbox_pb::ResolveCallerRequest>,
    ) -> Result<Response<mailbox_pb::CallerInfo>, Status> {
        MailboxService::resolve_caller(self, request)
            .await
            .map_err(refuse)
    }

    async fn remove_workspace(
        &self,
        request: Request<mailbox_pb::RemoveWorkspaceRequest>,
    ) -> Result<Response<mailbox_pb::Project>, Status> {
        MailboxService::remove_workspace(self, request)
            .await
            .map_err(refuse)
    }

    async fn add_conversation(
        &self,
        request: Request<mailbox_pb::AddConversationRequest>,
    ) -> Result<Response<mailbox_pb::Conversation>, Status> {
        MailboxService::add_conversation(self, request)
            .await
            .map_err(refuse)
    }

    async fn list_conversations(
        &self,
        request: Request<mailbox_pb::ListConversationsRequest>,
    ) -> Result<Response<mailbox_pb::ListConversationsResponse>, Status> {
        MailboxService::list_conversations(self, request)
            .await
            .map_err(refuse)
    }

    async fn remove_conversation(
        &self,
        request: Request<mailbox_pb::RemoveConversationRequest>,
    ) -> Result<Response<mailbox_pb::Conversation>, Status> {
        MailboxService::remove_conversation(self, request)
            .await
            .map_err(refuse)
    }

    async fn read_transcript(
        &self,
        request: Request<mailbox_pb::ReadTranscriptRequest>,
    ) -> Result<Response<mailbox_pb::ReadTranscriptResponse>, Status> {
        MailboxService::read_transcript(self, request)
            .await
            .map_err(refuse)
    }

    async fn hire(
        &self,
        request: Request<mailbox_pb::HireRequest>,
    ) -> Result<Response<mailbox_pb::HireRecord>, Status> {
        MailboxService::hire(self, request).await.map_err(refuse)
    }

    async fn close_hire(
        &self,
        request: Request<mailbox_pb::CloseHireRequest>,
    ) -> Result<Response<mailbox_pb::HireRecord>, Status> {
        MailboxService::close_hire(self, request)
            .await
            .map_err(refuse)
    }

    async fn roster(
        &self,
        request: Request<mailbox_pb::RosterRequest>,
    ) -> Result<Response<mailbox_pb::RosterResponse>, Status> {
        MailboxService::roster(self, request).await.map_err(refuse)
    }

    async fn seat_diagnostics(
        &self,
        request: Request<mailbox_pb::SeatDiagnosticsRequest>,
    ) -> Result<Response<mailbox_pb::SeatDiagnosticsResponse>, Status> {
        MailboxService::seat_diagnostics(self, request)
            .await
            .map_err(refuse)
    }

    async fn report(
        &self,
        request: Request<mailbox_pb::ReportRequest>,
    ) -> Result<Response<mailbox_pb::ReportResponse>, Status> {
        MailboxService::report(self, request).await.map_err(refuse)
    }

    async fn report_receipt(
        &self,
        request: Request<mailbox_pb::ReportReceiptRequest>,
    ) -> Result<Response<mailbox_pb::ReportReceiptResponse>, Status> {
        MailboxService::report_receipt(self, request)
            .await
            .map_err(refuse)
    }

    async fn message_seat(
        &self,
        request: Request<mailbox_pb::MessageSeatRequest>,
    ) -> Result<Response<mailbox_pb::MessageSeatResponse>, Status> {
        MailboxService::message_seat(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_poll(
        &self,
        request: Request<mailbox_pb::SeatPollRequest>,
    ) -> Result<Response<mailbox_pb::SeatPollResponse>, Status> {
        MailboxService::seat_poll(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_ack(
        &self,
        request: Request<mailbox_pb::SeatAckRequest>,
    ) -> Result<Response<mailbox_pb::SeatAckResponse>, Status> {
        MailboxService::seat_ack(self, request)
            .await
            .map_err(refuse)
    }

    async fn list_peers(
        &self,
        request: Request<mailbox_pb::ListPeersRequest>,
    ) -> Result<Response<mailbox_pb::ListPeersResponse>, Status> {
        MailboxService::list_peers(self, request)
            .await
            .map_err(refuse)
    }

    async fn send_peer(
        &self,
        request: Request<mailbox_pb::SendPeerRequest>,
    ) -> Result<Response<mailbox_pb::PeerReceipt>, Status> {
        MailboxService::send_peer(self, request)
            .await
            .map_err(refuse)
    }

    async fn get_peer_receipt(
        &self,
        request: Request<mailbox_pb::GetPeerReceiptRequest>,
    ) -> Result<Response<mailbox_pb::PeerReceipt>, Status> {
        MailboxService::get_peer_receipt(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_tools(
        &self,
        request: Request<mailbox_pb::SeatToolsRequest>,
    ) -> Result<Response<mailbox_pb::SeatToolsResponse>, Status> {
        MailboxService::seat_tools(self, request)
            .await
            .map_err(refuse)
    }

    async fn submit_review(
        &self,
        request: Request<mailbox_pb::SubmitReviewRequest>,
    ) -> Result<Response<mailbox_pb::ReviewCandidate>, Status> {
        MailboxService::submit_review(self, request)
            .await
            .map_err(refuse)
    }

    async fn get_review_candidate(
        &self,
        request: Request<mailbox_pb::GetReviewCandidateRequest>,
    ) -> Result<Response<mailbox_pb::ReviewCandidate>, Status> {
        MailboxService::get_review_candidate(self, request)
            .await
            .map_err(refuse)
    }

    async fn review_verdict(
        &self,
        request: Request<mailbox_pb::ReviewVerdictRequest>,
    ) -> Result<Response<mailbox_pb::ReviewCandidate>, Status> {
        MailboxService::review_verdict(self, request)
            .await
            .map_err(refuse)
    }

    async fn list_reviews(
        &self,
        request: Request<mailbox_pb::ListReviewsRequest>,
    ) -> Result<Response<mailbox_pb::ListReviewsResponse>, Status> {
        MailboxService::list_reviews(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_claim(
        &self,
        request: Request<mailbox_pb::SeatClaimRequest>,
    ) -> Result<Response<mailbox_pb::SeatClaimResponse>, Status> {
        MailboxService::seat_claim(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_release(
        &self,
        request: Request<mailbox_pb::SeatReleaseRequest>,
    ) -> Result<Response<mailbox_pb::SeatAckResponse>, Status> {
        MailboxService::seat_release(self, request)
            .await
            .map_err(refuse)
    }
}
