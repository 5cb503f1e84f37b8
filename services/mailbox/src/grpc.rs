//! The gRPC surface: each RPC delegates to its handler in `rpc/`, in the
//! order the proto declares them.

use clankie_proto::mailbox::v1 as pb;
use tonic::{Request, Response, Status};

use clankie_runtime::refuse::mailbox as refuse;

use crate::MailboxService;

#[tonic::async_trait]
impl pb::mailbox_server::Mailbox for MailboxService {
    async fn add_project(
        &self,
        request: Request<pb::AddProjectRequest>,
    ) -> Result<Response<pb::Project>, Status> {
        MailboxService::add_project(self, request)
            .await
            .map_err(refuse)
    }

    async fn list_projects(
        &self,
        request: Request<pb::ListProjectsRequest>,
    ) -> Result<Response<pb::ListProjectsResponse>, Status> {
        MailboxService::list_projects(self, request)
            .await
            .map_err(refuse)
    }

    async fn update_project(
        &self,
        request: Request<pb::UpdateProjectRequest>,
    ) -> Result<Response<pb::Project>, Status> {
        MailboxService::update_project(self, request)
            .await
            .map_err(refuse)
    }

    async fn wake(
        &self,
        request: Request<pb::WakeRequest>,
    ) -> Result<Response<pb::WakeResponse>, Status> {
        MailboxService::wake(self, request).await.map_err(refuse)
    }

    async fn wake_receipt(
        &self,
        request: Request<pb::WakeReceiptRequest>,
    ) -> Result<Response<pb::WakeResponse>, Status> {
        MailboxService::wake_receipt(self, request)
            .await
            .map_err(refuse)
    }

    async fn resolve_caller(
        &self,
        request: Request<pb::ResolveCallerRequest>,
    ) -> Result<Response<pb::CallerInfo>, Status> {
        MailboxService::resolve_caller(self, request)
            .await
            .map_err(refuse)
    }

    async fn remove_workspace(
        &self,
        request: Request<pb::RemoveWorkspaceRequest>,
    ) -> Result<Response<pb::Project>, Status> {
        MailboxService::remove_workspace(self, request)
            .await
            .map_err(refuse)
    }

    async fn add_conversation(
        &self,
        request: Request<pb::AddConversationRequest>,
    ) -> Result<Response<pb::Conversation>, Status> {
        MailboxService::add_conversation(self, request)
            .await
            .map_err(refuse)
    }

    async fn list_conversations(
        &self,
        request: Request<pb::ListConversationsRequest>,
    ) -> Result<Response<pb::ListConversationsResponse>, Status> {
        MailboxService::list_conversations(self, request)
            .await
            .map_err(refuse)
    }

    async fn remove_conversation(
        &self,
        request: Request<pb::RemoveConversationRequest>,
    ) -> Result<Response<pb::Conversation>, Status> {
        MailboxService::remove_conversation(self, request)
            .await
            .map_err(refuse)
    }

    async fn read_transcript(
        &self,
        request: Request<pb::ReadTranscriptRequest>,
    ) -> Result<Response<pb::ReadTranscriptResponse>, Status> {
        MailboxService::read_transcript(self, request)
            .await
            .map_err(refuse)
    }

    async fn hire(
        &self,
        request: Request<pb::HireRequest>,
    ) -> Result<Response<pb::HireRecord>, Status> {
        MailboxService::hire(self, request).await.map_err(refuse)
    }

    async fn close_hire(
        &self,
        request: Request<pb::CloseHireRequest>,
    ) -> Result<Response<pb::HireRecord>, Status> {
        MailboxService::close_hire(self, request)
            .await
            .map_err(refuse)
    }

    async fn roster(
        &self,
        request: Request<pb::RosterRequest>,
    ) -> Result<Response<pb::RosterResponse>, Status> {
        MailboxService::roster(self, request).await.map_err(refuse)
    }

    async fn report(
        &self,
        request: Request<pb::ReportRequest>,
    ) -> Result<Response<pb::ReportResponse>, Status> {
        MailboxService::report(self, request).await.map_err(refuse)
    }

    async fn message_seat(
        &self,
        request: Request<pb::MessageSeatRequest>,
    ) -> Result<Response<pb::MessageSeatResponse>, Status> {
        MailboxService::message_seat(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_poll(
        &self,
        request: Request<pb::SeatPollRequest>,
    ) -> Result<Response<pb::SeatPollResponse>, Status> {
        MailboxService::seat_poll(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_ack(
        &self,
        request: Request<pb::SeatAckRequest>,
    ) -> Result<Response<pb::SeatAckResponse>, Status> {
        MailboxService::seat_ack(self, request)
            .await
            .map_err(refuse)
    }

    async fn list_peers(
        &self,
        request: Request<pb::ListPeersRequest>,
    ) -> Result<Response<pb::ListPeersResponse>, Status> {
        MailboxService::list_peers(self, request)
            .await
            .map_err(refuse)
    }

    async fn send_peer(
        &self,
        request: Request<pb::SendPeerRequest>,
    ) -> Result<Response<pb::PeerReceipt>, Status> {
        MailboxService::send_peer(self, request)
            .await
            .map_err(refuse)
    }

    async fn get_peer_receipt(
        &self,
        request: Request<pb::GetPeerReceiptRequest>,
    ) -> Result<Response<pb::PeerReceipt>, Status> {
        MailboxService::get_peer_receipt(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_tools(
        &self,
        request: Request<pb::SeatToolsRequest>,
    ) -> Result<Response<pb::SeatToolsResponse>, Status> {
        MailboxService::seat_tools(self, request)
            .await
            .map_err(refuse)
    }

    async fn submit_review(
        &self,
        request: Request<pb::SubmitReviewRequest>,
    ) -> Result<Response<pb::ReviewCandidate>, Status> {
        MailboxService::submit_review(self, request)
            .await
            .map_err(refuse)
    }

    async fn get_review_candidate(
        &self,
        request: Request<pb::GetReviewCandidateRequest>,
    ) -> Result<Response<pb::ReviewCandidate>, Status> {
        MailboxService::get_review_candidate(self, request)
            .await
            .map_err(refuse)
    }

    async fn review_verdict(
        &self,
        request: Request<pb::ReviewVerdictRequest>,
    ) -> Result<Response<pb::ReviewCandidate>, Status> {
        MailboxService::review_verdict(self, request)
            .await
            .map_err(refuse)
    }

    async fn list_reviews(
        &self,
        request: Request<pb::ListReviewsRequest>,
    ) -> Result<Response<pb::ListReviewsResponse>, Status> {
        MailboxService::list_reviews(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_claim(
        &self,
        request: Request<pb::SeatClaimRequest>,
    ) -> Result<Response<pb::SeatClaimResponse>, Status> {
        MailboxService::seat_claim(self, request)
            .await
            .map_err(refuse)
    }

    async fn seat_release(
        &self,
        request: Request<pb::SeatReleaseRequest>,
    ) -> Result<Response<pb::SeatAckResponse>, Status> {
        MailboxService::seat_release(self, request)
            .await
            .map_err(refuse)
    }
}
