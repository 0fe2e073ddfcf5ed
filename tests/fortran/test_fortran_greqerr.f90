! The error of a failed MPI_IALLREDUCE from Fortran (fortran.test, under
! COLLAR_SIM_FAIL=copy:1 on every rank: the first operation fails).  The
! operation runs on a duplicate of MPI_COMM_WORLD whose handler is
! MPI_ERRORS_RETURN, while MPI_COMM_WORLD keeps MPI_ERRORS_ARE_FATAL: an
! error raised on MPI_COMM_WORLD ends the job.  The argument says how it is
! completed (wait, test, waitall, waitany, waitsome); "none" runs without a
! failure (the MPI library alone).  Checked: ierror (the error's class is
! MPI_ERR_OTHER; MPI_ERR_IN_STATUS with the error in the status for
! waitall and waitsome), the request is MPI_REQUEST_NULL afterwards, the
! other request of waitall worked, and an allreduce after it is right.
program test_fortran_greqerr
    use mpi
    implicit none
    integer, parameter :: n = 6144
    integer :: rank, nranks, ierr, npass, nfail, i, comm, cls, idx, nout
    integer :: reqs(2), indices(2), st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 2)
    integer, allocatable :: a(:), b(:), c(:)
    character(len=16) :: how
    logical :: ok, flag, fails

    npass = 0
    nfail = 0
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
    call get_command_argument(1, how)
    fails = how /= 'none'
    if (.not. fails) how = 'wait'
    call MPI_Comm_dup(MPI_COMM_WORLD, comm, ierr)
    call MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN, ierr)
    allocate (a(n), b(n), c(n))
    a = rank + 1
    b = -1
    c = -1

    call MPI_Iallreduce(a, b, n, MPI_INTEGER, MPI_SUM, comm, reqs(1), ierr)
    call check(ierr == MPI_SUCCESS, 'iallreduce start')
    reqs(2) = MPI_REQUEST_NULL
    if (how == 'waitall' .or. how == 'waitany' .or. how == 'waitsome') then
        call MPI_Iallreduce(a, c, n, MPI_INTEGER, MPI_SUM, comm, reqs(2), ierr)
        call check(ierr == MPI_SUCCESS, 'second iallreduce start')
    end if

    select case (how)
    case ('wait')
        call MPI_Wait(reqs(1), st, ierr)
        call expect_error(ierr, 'MPI_WAIT')
    case ('test')
        flag = .false.
        do while (.not. flag)
            call MPI_Test(reqs(1), flag, st, ierr)
            if (ierr /= MPI_SUCCESS) exit
        end do
        call check(flag, 'MPI_TEST flag')
        call expect_error(ierr, 'MPI_TEST')
    case ('waitall')
        call MPI_Waitall(2, reqs, sts, ierr)
        call MPI_Error_class(ierr, cls, i)
        call check(cls == MPI_ERR_IN_STATUS, 'MPI_WAITALL: MPI_ERR_IN_STATUS')
        call expect_error(sts(MPI_ERROR, 1), 'MPI_WAITALL status 1')
        call check(sts(MPI_ERROR, 2) == MPI_SUCCESS, 'MPI_WAITALL status 2')
        call check(all(c == nranks * (nranks + 1) / 2), 'MPI_WAITALL: result 2')
    case ('waitany')
        do i = 1, 2
            call MPI_Waitany(2, reqs, idx, st, ierr)
            if (idx == 1) then
                call expect_error(ierr, 'MPI_WAITANY index 1')
            else
                call check(idx == 2 .and. ierr == MPI_SUCCESS, 'MPI_WAITANY index 2')
            end if
        end do
        call check(all(c == nranks * (nranks + 1) / 2), 'MPI_WAITANY: result 2')
    case ('waitsome')
        do while (reqs(1) /= MPI_REQUEST_NULL .or. reqs(2) /= MPI_REQUEST_NULL)
            call MPI_Waitsome(2, reqs, nout, indices, sts, ierr)
            do i = 1, nout
                if (indices(i) == 1) then
                    call MPI_Error_class(ierr, cls, idx)
                    call check(cls == MPI_ERR_IN_STATUS, 'MPI_WAITSOME: MPI_ERR_IN_STATUS')
                    call expect_error(sts(MPI_ERROR, i), 'MPI_WAITSOME status')
                end if
            end do
        end do
        call check(all(c == nranks * (nranks + 1) / 2), 'MPI_WAITSOME: result 2')
    end select
    call check(reqs(1) == MPI_REQUEST_NULL .and. reqs(2) == MPI_REQUEST_NULL, &
               'requests freed')
    if (.not. fails) then
        call check(all(b == nranks * (nranks + 1) / 2), 'result')
    end if

    b = -1
    call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_SUM, comm, ierr)
    call check(ierr == MPI_SUCCESS .and. all(b == nranks * (nranks + 1) / 2), &
               'allreduce after the failure')

    call MPI_Comm_free(comm, ierr)
    write (*, '(a, i0, a, i0, a, i0, a)') 'test_fortran_greqerr: rank ', rank, ': ', &
        npass, ' passed, ', nfail, ' failed'
    call MPI_Finalize(ierr)
    if (nfail > 0) stop 1

contains

    subroutine check(cond, what)
        logical, intent(in) :: cond
        character(len=*), intent(in) :: what
        if (cond) then
            npass = npass + 1
        else
            nfail = nfail + 1
            write (*, '(a, i0, a, a)') 'rank ', rank, ': FAIL ', what
        end if
    end subroutine check

    ! The operation's error where one is injected, else success.
    subroutine expect_error(code, what)
        integer, intent(in) :: code
        character(len=*), intent(in) :: what
        integer :: c, e
        if (fails) then
            call MPI_Error_class(code, c, e)
            call check(c == MPI_ERR_OTHER, what // ': MPI_ERR_OTHER')
        else
            call check(code == MPI_SUCCESS, what // ': MPI_SUCCESS')
        end if
    end subroutine expect_error

end program test_fortran_greqerr
