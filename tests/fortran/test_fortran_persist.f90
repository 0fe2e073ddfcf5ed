! MPI_Allreduce_init from Fortran (fortran.test, MPI-4 libraries only: the
! program does not link where the library has no mpi_allreduce_init):
! persistent allreduces started with MPI_Start and MPI_Startall, completed
! with MPI_Wait, MPI_Waitall and MPI_Test, freed with MPI_Request_free; the
! results checked on every rank after every round.
program test_fortran_persist
    use mpi
    implicit none
    integer, parameter :: n = 50021
    integer :: rank, nranks, ierr, npass, nfail, i, round, reqs(2)
    integer, allocatable :: a(:), b(:)
    double precision, allocatable :: x(:)
    logical :: ok, flag

    npass = 0
    nfail = 0
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
    allocate (a(n), b(n), x(n))

    call MPI_Allreduce_init(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, &
                            MPI_INFO_NULL, reqs(1), ierr)
    call check(ierr == MPI_SUCCESS .and. reqs(1) /= MPI_REQUEST_NULL, &
               'allreduce_init integer')
    call MPI_Allreduce_init(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, &
                            MPI_COMM_WORLD, MPI_INFO_NULL, reqs(2), ierr)
    call check(ierr == MPI_SUCCESS .and. reqs(2) /= MPI_REQUEST_NULL, &
               'allreduce_init real*8 in place')

    do round = 1, 3
        do i = 1, n
            a(i) = rank * round + i
            x(i) = dble(rank + round) * 0.25d0 + dble(mod(i, 17))
        end do
        b = -1
        if (round == 1) then
            call MPI_Start(reqs(1), ierr)
            ok = ierr == MPI_SUCCESS
            call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
            ok = ok .and. ierr == MPI_SUCCESS
            call MPI_Start(reqs(2), ierr)
            ok = ok .and. ierr == MPI_SUCCESS
            flag = .false.
            do while (.not. flag .and. ierr == MPI_SUCCESS)
                call MPI_Test(reqs(2), flag, MPI_STATUS_IGNORE, ierr)
            end do
            ok = ok .and. ierr == MPI_SUCCESS
        else
            call MPI_Startall(2, reqs, ierr)
            ok = ierr == MPI_SUCCESS
            call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
            ok = ok .and. ierr == MPI_SUCCESS
        end if
        ! persistent requests stay allocated after completion
        ok = ok .and. reqs(1) /= MPI_REQUEST_NULL .and. reqs(2) /= MPI_REQUEST_NULL
        do i = 1, n
            ok = ok .and. b(i) == round * (nranks * (nranks - 1) / 2) + nranks * i &
                    .and. abs(x(i) - ref(round, i)) <= 1.0d-12 * abs(ref(round, i))
        end do
        call check(ok, 'persistent allreduce round')
    end do

    call MPI_Request_free(reqs(1), ierr)
    ok = ierr == MPI_SUCCESS .and. reqs(1) == MPI_REQUEST_NULL
    call MPI_Request_free(reqs(2), ierr)
    ok = ok .and. ierr == MPI_SUCCESS .and. reqs(2) == MPI_REQUEST_NULL
    call check(ok, 'MPI_Request_free')

    write (*, '(a,i0,a,i0,a,i0,a)') 'test_fortran_persist: rank ', rank, ': ', &
        npass, ' passed, ', nfail, ' failed'
    call MPI_Finalize(ierr)
    if (nfail > 0) stop 1

contains

    subroutine check(good, what)
        logical, intent(in) :: good
        character(len=*), intent(in) :: what
        if (good) then
            npass = npass + 1
        else
            nfail = nfail + 1
            write (*, '(a,i0,a,a)') 'test_fortran_persist: FAIL rank ', rank, ': ', what
        end if
    end subroutine check

    double precision function ref(round, i)
        integer, intent(in) :: round, i
        integer :: q
        ref = 0.0d0
        do q = 0, nranks - 1
            ref = ref + (dble(q + round) * 0.25d0 + dble(mod(i, 17)))
        end do
    end function ref

end program test_fortran_persist
