//! Joining a department over HTTP, as a browser does: by an invitation link,
//! or by asking and waiting for a maintainer. Roles decide who may publish.

use crate::common::{redirected_error, TestServer};

const PASSWORD: &str = "a-long-enough-password";

server_test!(an_invitation_link_shows_its_department_and_signs_the_newcomer_in, |srv: TestServer| async move {
    let token = srv.invite("finance", "author").await;
    let browser = srv.browser();
    let (status, html) = srv.page(&browser, &format!("/register?invite={token}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("Join Finance") && html.contains("as an author"), "{html}");
    assert!(!html.contains("name=\"new_department\""), "no department to pick: the invitation says");
    let form = [("username", "ada"), ("display_name", "Ada"), ("password", PASSWORD), ("password_confirm", PASSWORD), ("invite", &token)];
    let res = srv.post_form_from(&browser, "/register", "/api/register", &form).await;
    assert_eq!((res.status().as_u16(), redirected_error(&res)), (302, None));
    let (status, me) = srv.call(&browser, "me", &[]).await;
    assert_eq!((status, me["department"].as_str(), me["role"].as_str()), (200, Some("finance"), Some("author")));
    // Used once: the link now says so, and a second registration with it fails.
    let (_, html) = srv.page(&srv.browser(), &format!("/register?invite={token}")).await;
    assert!(html.contains("cannot be used"), "{html}");
    let form = [("username", "eve"), ("display_name", "Eve"), ("password", PASSWORD), ("password_confirm", PASSWORD), ("invite", &token)];
    let res = srv.post_form_from(&srv.browser(), "/register", "/api/register", &form).await;
    assert!(redirected_error(&res).is_some_and(|e| e.to_string().contains("not valid")), "{:?}", redirected_error(&res));
});

server_test!(without_an_invitation_a_newcomer_asks_to_join_and_waits_for_approval, |srv: TestServer| async move {
    let form = [
        ("username", "ada"),
        ("display_name", "Ada"),
        ("department", "general"),
        ("new_department", ""),
        ("password", PASSWORD),
        ("password_confirm", PASSWORD),
    ];
    let res = srv.post_form_from(&srv.browser(), "/register", "/api/register", &form).await;
    assert_eq!(res.status(), 302);
    assert_eq!(res.headers()["location"], "/login?requested=General");
    let (_, html) = srv.page(&srv.browser(), "/login?requested=General").await;
    assert!(html.contains("Your request to join") && html.contains("General"), "{html}");
    let res = srv.sign_in(&srv.browser(), "ada").await;
    assert!(redirected_error(&res).is_some_and(|e| e.to_string().contains("waiting for a maintainer")), "{:?}", redirected_error(&res));
    // Naming a new department does not create it.
    let form = [
        ("username", "bob"),
        ("display_name", "Bob"),
        ("department", "general"),
        ("new_department", "skunkworks"),
        ("password", PASSWORD),
        ("password_confirm", PASSWORD),
    ];
    let res = srv.post_form_from(&srv.browser(), "/register", "/api/register", &form).await;
    assert!(redirected_error(&res).is_some_and(|e| e.to_string().contains("no department")), "{:?}", redirected_error(&res));

    let admin = srv.admin().await;
    let (_, people) = srv.call(&admin, "people", &[]).await;
    assert_eq!(people["requests"][0]["username"], "ada", "{people}");
    let (status, _) = srv.call(&admin, "people/requests/decide", &[("username", "ada"), ("decision", "member")]).await;
    assert_eq!(status, 200);
    let ada = srv.browser();
    let res = srv.sign_in(&ada, "ada").await;
    assert_eq!(redirected_error(&res), None);
    let (_, me) = srv.call(&ada, "me", &[]).await;
    assert_eq!(me["role"], "member");
});

server_test!(a_member_runs_the_departments_tools_but_cannot_create_one, |srv: TestServer| async move {
    let mia = srv.joined("mia", "finance", "member").await;
    let (status, body) = srv
        .call(&mia, "tools/create", &[("name", "mine"), ("title", "Mine"), ("description", ""), ("tags", ""), ("visibility", "everyone")])
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.to_string().contains("ask a maintainer to make you an author"), "{body}");
    // Nor may a member manage people.
    assert_eq!(srv.call(&mia, "people", &[]).await.0, 403);
    assert_eq!(srv.call(&mia, "people/invite", &[("department", "finance"), ("role", "maintainer"), ("days", "7")]).await.0, 403);
});

server_test!(a_maintainer_invites_to_their_department_and_no_other, |srv: TestServer| async move {
    srv.member("lena", "legal").await;
    let max = srv.joined("max", "finance", "maintainer").await;
    let (status, link) = srv.call(&max, "people/invite", &[("department", "finance"), ("role", "author"), ("days", "3")]).await;
    assert_eq!(status, 200, "{link}");
    assert!(link["url"].as_str().unwrap().starts_with(&format!("{}/register?invite=inv_", srv.base)), "{link}");
    let (status, _) = srv.call(&max, "people/invite", &[("department", "legal"), ("role", "author"), ("days", "3")]).await;
    assert_eq!(status, 403);
    let (status, _) = srv.call(&max, "people/role", &[("username", "lena"), ("role", "member")]).await;
    assert_eq!(status, 403);
    let (_, people) = srv.call(&max, "people", &[]).await;
    let names: Vec<_> = people["people"].as_array().unwrap().iter().map(|p| p["username"].as_str().unwrap()).collect();
    assert_eq!(names, ["max"], "{people}");
    let (status, html) = srv.page(&max, "/people").await;
    assert_eq!(status, 200);
    assert!(html.contains("Invite someone") && html.contains("Open invitations (1)"), "{html}");
});
